# A Hugging Face Docker Space (README front matter: `sdk: docker`, `app_port: 7860`) that starts with the same
# embedded target and trained drafts as `make run`. Build and run anywhere:
#   docker build -t specscope . && docker run -p 7860:7860 specscope
# The free CPU tier (2 vCPU, 16 GB) fits: the image holds the CPU build of torch; see docs/DEPLOY.md.
FROM python:3.11-slim

# The CPU build of torch (the pinned torch==2.13.0 resolves to 2.13.0+cpu there; the default PyPI wheel
# would pull several GB of CUDA libraries). A GPU Space builds with --build-arg TORCH_INDEX=.../whl/cu128.
ARG TORCH_INDEX=https://download.pytorch.org/whl/cpu
ENV PIP_EXTRA_INDEX_URL=${TORCH_INDEX} \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONUNBUFFERED=1

# Spaces run the container as user 1000; everything it writes lives under its home.
RUN useradd -m -u 1000 user
USER user
ENV HOME=/home/user \
    PATH=/home/user/.local/bin:$PATH \
    SPECSCOPE_CACHE=/home/user/.cache/specscope \
    GRADIO_SERVER_NAME=0.0.0.0 \
    GRADIO_SERVER_PORT=7860 \
    PYTHONPATH=/home/user/app
WORKDIR /home/user/app

# Dependencies first (a code change then rebuilds only the last layers).
COPY --chown=user requirements.txt ./
RUN python -m pip install --user -q --no-cache-dir -r requirements.txt

COPY --chown=user . .
RUN scripts/space_setup.sh python

EXPOSE 7860
CMD ["python", "app.py"]
