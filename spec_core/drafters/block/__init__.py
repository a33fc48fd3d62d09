"""The parallel block drafter (DFlash, arXiv 2602.06036): network, runtime drafter and assets apart.

Its training losses (``block:LOSS``) are the weight schedules of :data:`spec_core.core.rules.BLOCK_LOSSES`.
"""
