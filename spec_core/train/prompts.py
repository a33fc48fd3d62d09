"""Training prompts of many kinds, templated or written by the project (never the benchmark prompts).

Kinds: code, math word problems, summarization, chat, question answering, lists and rewrites. Two sources:

- ``templates``: combinations of the lists below (unbounded, but every prompt has a template's shape);
- ``written``: the prompt bank, ``prompt_bank/*.jsonl`` (``{"category", "prompt"}`` per line), prompts
  written one by one in the voice of real users, with their own passages to summarize. Templated prompts
  alone left the draft 15 points less accurate on natural prompts than on held-out templated ones.

Either list is deterministic for a seed, so a data run can be resumed shard by shard. Two more sources live
beside this module: ``magpie`` (questions the target writes itself, :mod:`spec_core.train.magpie`) and
``passages`` (copy-heavy tasks on real passages, :mod:`spec_core.train.passages`). :func:`overlaps_heldout` keeps
every source clear of Spec-Bench and of the project's held-out prompt sets.
"""

from __future__ import annotations

import functools
import json
import random
import re
from pathlib import Path

PROMPT_BANK = Path(__file__).resolve().parent / "prompt_bank"
PROMPTS_DIR = Path(__file__).resolve().parents[2] / "prompts"
SOURCES = ("templates", "written")
HELDOUT_FILES = ("spec_bench/question.jsonl", "specscope.jsonl", "examples.jsonl", "eval/*.jsonl")  # under prompts/
OVERLAP_WORDS = 13  # a shared run of this many words counts as the same text (GPT-3's contamination check)
MIN_RUN_WORDS = 4  # a held-out prompt shorter than OVERLAP_WORDS counts whole from this many words

CODE_TASKS = [
    "reverses a string",
    "checks whether a number is prime",
    "returns the n-th Fibonacci number",
    "counts the vowels in a sentence",
    "merges two sorted lists",
    "removes duplicates from a list",
    "computes the factorial of n",
    "finds the largest element of a list",
    "checks if a word is a palindrome",
    "converts Celsius to Fahrenheit",
    "flattens a nested list",
    "sorts a list of dictionaries by a key",
    "reads a text file and counts its lines",
    "returns the greatest common divisor of two numbers",
    "computes the average of a list of numbers",
    "capitalizes every word of a sentence",
    "finds the second smallest number in a list",
    "checks whether two strings are anagrams",
    "computes the sum of the digits of an integer",
    "returns the intersection of two lists",
    "implements binary search",
    "transposes a matrix",
    "counts word frequencies in a text",
    "validates an email address with a regular expression",
    "converts a binary string to an integer",
    "generates all permutations of a list",
    "rotates a list by k positions",
    "implements a stack class",
    "checks if parentheses in a string are balanced",
    "returns the mode of a list",
    "parses a date string and prints the weekday",
    "computes the median of a list",
    "converts a Roman numeral to an integer",
    "finds all even numbers in a list",
    "counts how many times each character appears in a string",
    "implements a queue with two stacks",
    "checks whether a year is a leap year",
    "returns the longest word in a sentence",
    "computes compound interest",
    "draws a triangle of stars of height n",
    "shuffles a list without using a library",
    "finds the missing number in a list from 1 to n",
    "converts a list of strings to upper case",
    "reads a CSV file and sums one column",
    "implements bubble sort",
    "implements a linked list with insert and delete",
    "returns the n largest values of a dictionary",
    "removes punctuation from a string",
    "computes the distance between two points",
    "prints a multiplication table",
]
CODE_LANGS = ["Python", "Python", "Python", "JavaScript", "C", "Java", "Rust", "Go"]
CODE_FORMS = [
    "Write a {lang} function that {task}.",
    "Write a {lang} function that {task}, and explain how it works.",
    "How do I write code in {lang} that {task}?",
    "Show me a short {lang} program that {task}.",
    "Explain, step by step, an algorithm that {task}.",
]

ITEMS = ["apples", "pencils", "notebooks", "cookies", "tickets", "books", "shirts", "oranges", "marbles", "stickers"]
NAMES = ["Tom", "Anna", "Maria", "Sam", "Lena", "Omar", "Yuki", "Carlos", "Priya", "Ben"]
MATH_FORMS = [
    "{name} buys {a} {item} at {b} dollars each. How much does {name} pay in total?",
    "{name} has {a} {item} and gives away {c}. Then {name} buys {b} more. How many {item} does {name} have now?",
    "A box holds {b} {item}. How many boxes are needed for {a} {item}?",
    "{name} reads {b} pages a day. How many days does it take to read a book of {a} pages?",
    "A train travels {a} kilometers in {b} hours. What is its average speed?",
    "What is {a} multiplied by {b}, minus {c}?",
    "If a rectangle is {a} cm long and {b} cm wide, what are its area and perimeter?",
    "{name} saves {b} dollars a week. How many weeks until {name} has {a} dollars?",
    "Solve for x: {b}x + {c} = {a}.",
    "What is {c} percent of {a}?",
]

TOPICS = [
    "the water cycle",
    "photosynthesis",
    "the French Revolution",
    "black holes",
    "the human heart",
    "climate change",
    "the internet",
    "volcanoes",
    "the Roman Empire",
    "electric cars",
    "vaccines",
    "the stock market",
    "honey bees",
    "the moon landing",
    "machine learning",
    "recycling",
    "the Great Wall",
    "earthquakes",
    "renewable energy",
    "the printing press",
    "coral reefs",
    "sleep",
    "democracy",
    "the immune system",
    "ocean tides",
    "gravity",
    "the Renaissance",
    "coffee",
    "rainforests",
    "DNA",
    "the solar system",
    "inflation",
    "antibiotics",
    "the Olympic Games",
    "bridges",
    "tea",
    "glaciers",
    "the Industrial Revolution",
    "artificial intelligence",
    "the ancient Egyptians",
    "wind turbines",
    "the rain cycle in cities",
    "nutrition",
    "the Silk Road",
    "electric guitars",
    "bacteria",
    "the Amazon river",
    "social media",
    "solar panels",
    "the Cold War",
    "chess",
    "deserts",
    "the theory of evolution",
    "public transport",
    "hurricanes",
    "the periodic table",
    "smartphones",
    "jazz music",
    "the Moon",
    "plastic pollution",
    "the Pyramids of Giza",
    "mental health",
    "cryptocurrency",
    "penguins",
    "the metric system",
    "space telescopes",
    "dinosaurs",
]
QA_FORMS = [
    "What is {topic}?",
    "Explain {topic} in simple terms.",
    "Why is {topic} important?",
    "Give me three interesting facts about {topic}.",
    "How would you explain {topic} to a child?",
    "What are the main causes and effects of {topic}?",
    "Write a short paragraph about {topic}.",
    "What are common misconceptions about {topic}?",
    "What are the pros and cons of {topic}?",
    "Describe the history of {topic} briefly.",
    "How does {topic} work?",
    "Write a quiz with three questions about {topic}.",
    "What would happen without {topic}?",
]
SENTENCE_PARTS = [
    "Researchers studied {topic} for many years.",
    "Many people find {topic} hard to understand.",
    "{Topic} affects daily life in surprising ways.",
    "Recent reports describe new findings on {topic}.",
    "Teachers often use simple models to explain {topic}.",
    "The history of {topic} is long and complex.",
    "Experts disagree about the future of {topic}.",
    "Some countries invest heavily in {topic}.",
    "A new book about {topic} became popular last year.",
    "Students visited a museum about {topic}.",
]
SUMMARY_FORMS = [
    "Summarize the following text in one sentence:\n\n{text}",
    "Give a short summary of this paragraph:\n\n{text}",
    "TL;DR:\n\n{text}",
    "What is the main idea of this text?\n\n{text}",
]
ACTIVITIES = [
    "learn a new language",
    "cook rice",
    "start running",
    "save money",
    "write a cover letter",
    "plant tomatoes",
    "prepare for an exam",
    "sleep better",
    "make new friends",
    "organize my desk",
    "train a puppy",
    "plan a trip to Italy",
    "reduce stress",
    "start a blog",
    "fix a flat bicycle tire",
    "make a budget",
    "learn to play guitar",
    "bake bread",
    "give a good presentation",
    "stay focused",
    "write a thank-you note",
    "keep a houseplant alive",
    "learn to swim as an adult",
    "ask for a raise",
    "eat more vegetables",
    "study for a math test",
    "clean my kitchen quickly",
    "start meditating",
    "write a short story",
    "choose a first laptop",
    "prepare a healthy lunch",
    "drink more water",
    "get up earlier",
    "improve my handwriting",
    "learn to draw",
]
CHAT_FORMS = [
    "How do I {act}?",
    "What are some tips to {act}?",
    "I want to {act}. Where should I start?",
    "Can you help me {act}?",
    "What mistakes should I avoid when I try to {act}?",
    "Hi! How can I {act}?",
]
THINGS = [
    "fruits",
    "countries in Europe",
    "programming languages",
    "healthy breakfasts",
    "board games",
    "famous scientists",
    "musical instruments",
    "ways to save energy",
    "hobbies",
    "types of clouds",
    "animals that live in the ocean",
    "kitchen tools",
    "sports",
    "planets",
    "book genres",
    "vegetables that grow fast",
    "inventions of the 20th century",
    "capital cities",
    "ways to stay healthy",
    "job interview questions",
    "birds",
    "things to do on a rainy day",
]
SENTENCES = [
    "the meeting was moved to next week because many people could not come",
    "i think we should buy a new printer since the old one breaks all the time",
    "the movie was long but the ending was really good",
    "please send me the report before friday",
    "our team won the game after a hard second half",
    "the weather is nice today so we are going to the park",
    "he dont like coffee but he drink it every morning",
    "the store closes at nine so we need to hurry",
    "my brother lost his keys again and we waited outside for an hour",
    "the new software update made the computer much slower",
]
LIST_FORMS = [
    "List five {things}.",
    "Name three {things} and describe each briefly.",
    "Give me a list of {things}.",
    "Rewrite this sentence in a formal tone: {sentence}",
    "Correct the grammar of this sentence: {sentence}",
    "Translate into French: {sentence}",
    "Make this sentence shorter: {sentence}",
    "Write an email to a friend about {topic}.",
    "Write a short poem about {topic}.",
    "Give me a title for an article about {topic}.",
    "Write a tweet about {topic}.",
    "Explain {topic} using an analogy.",
    "Write a haiku about {topic}.",
    "Write a short story about {topic} in three sentences.",
]


STYLE_SUFFIXES = [
    " Keep it short.",
    " Please answer in a numbered list.",
    " Explain it like I am ten years old.",
    " I am a beginner.",
    " Answer in two or three sentences.",
    " Be detailed.",
    " Use simple words.",
    " Give an example.",
]


def _paragraph(rng: random.Random, topic: str) -> str:
    parts = rng.sample(SENTENCE_PARTS, 4)
    return " ".join(p.format(topic=topic, Topic=topic[0].upper() + topic[1:]) for p in parts)


def make_prompt(rng: random.Random) -> tuple[str, str]:
    """One (category, prompt) pair."""
    kind = rng.choice(["code", "math", "summarization", "chat", "qa", "lists"])
    topic = rng.choice(TOPICS)
    if kind == "code":
        text = rng.choice(CODE_FORMS).format(lang=rng.choice(CODE_LANGS), task=rng.choice(CODE_TASKS))
    elif kind == "math":
        a, b, c = rng.randint(20, 500), rng.randint(2, 19), rng.randint(1, 15)
        text = rng.choice(MATH_FORMS).format(name=rng.choice(NAMES), item=rng.choice(ITEMS), a=a, b=b, c=c)
    elif kind == "summarization":
        text = rng.choice(SUMMARY_FORMS).format(text=_paragraph(rng, topic))
    elif kind == "chat":
        text = rng.choice(CHAT_FORMS).format(act=rng.choice(ACTIVITIES))
    elif kind == "qa":
        text = rng.choice(QA_FORMS).format(topic=topic)
    else:
        text = rng.choice(LIST_FORMS).format(things=rng.choice(THINGS), sentence=rng.choice(SENTENCES), topic=topic)
    if kind in ("code", "chat", "qa", "lists") and rng.random() < 0.5:
        text += rng.choice(STYLE_SUFFIXES)  # varies the answers' length and register
    return kind, text


def written_prompts(seed: int = 1234, bank: Path = PROMPT_BANK) -> list[tuple[str, str]]:
    """Every (category, prompt) of the prompt bank, distinct, in a shuffled order fixed by ``seed``."""
    seen: set[str] = set()
    out: list[tuple[str, str]] = []
    for path in sorted(Path(bank).glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                row = json.loads(line)
                if row["prompt"] not in seen:
                    seen.add(row["prompt"])
                    out.append((row["category"], row["prompt"]))
    random.Random(seed).shuffle(out)
    return out


def training_prompts(n: int, seed: int = 1234, source: str = "templates") -> list[tuple[str, str]]:
    """``n`` distinct (category, prompt) pairs from ``source``, deterministic for ``seed`` (``written``
    gives at most the bank's size)."""
    if source == "written":
        return [(kind, text) for kind, text in written_prompts(seed) if not overlaps_heldout(text)][:n]
    if source != "templates":
        raise ValueError(f"unknown prompt source {source!r} (one of {SOURCES})")
    rng = random.Random(seed)
    seen: set[str] = set()
    out: list[tuple[str, str]] = []
    for _ in range(50 * n):
        kind, text = make_prompt(rng)
        if text not in seen and not overlaps_heldout(text):  # drops 3 of the first 1,600 (the shipped data)
            seen.add(text)
            out.append((kind, text))
            if len(out) == n:
                break
    return out


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


@functools.lru_cache(maxsize=1)
def heldout_texts() -> tuple[str, ...]:
    """Every prompt the project measures on and never trains on: Spec-Bench's questions (every turn), the
    benchmark prompts (``prompts/specscope.jsonl``, ``prompts/examples.jsonl``) and the evaluation tasks
    (``prompts/eval/*.jsonl``, both splits)."""
    out: list[str] = []
    for pattern in HELDOUT_FILES:
        for path in sorted(PROMPTS_DIR.glob(pattern)):
            for line in path.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    row = json.loads(line)
                    out += row.get("turns") or [row["prompt"]]
    return tuple(out)


@functools.lru_cache(maxsize=1)
def _heldout_index() -> tuple[frozenset[str], frozenset[tuple[str, ...]]]:
    """(every held-out prompt's words, the runs a training prompt must not contain): each run of OVERLAP_WORDS
    words of a held-out prompt, and a shorter prompt (MIN_RUN_WORDS words or more) whole."""
    texts = [_words(t) for t in heldout_texts()]
    whole = frozenset(" ".join(w) for w in texts)
    runs = {tuple(w[i : i + OVERLAP_WORDS]) for w in texts for i in range(len(w) - OVERLAP_WORDS + 1)}
    runs |= {tuple(w) for w in texts if MIN_RUN_WORDS <= len(w) < OVERLAP_WORDS}
    return whole, frozenset(runs)


def overlaps_heldout(text: str) -> bool:
    """Whether ``text`` is a held-out prompt (same words), shares a run of OVERLAP_WORDS words with one, or
    contains a shorter one whole (``Write a Python function that checks whether a number is prime. Keep it
    short.`` holds a benchmark prompt)."""
    whole, runs = _heldout_index()
    words = _words(text)
    if " ".join(words) in whole:
        return True
    lengths = range(MIN_RUN_WORDS, OVERLAP_WORDS + 1)
    return any(tuple(words[i : i + n]) in runs for n in lengths for i in range(len(words) - n + 1))
