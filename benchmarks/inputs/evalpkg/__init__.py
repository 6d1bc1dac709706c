"""Evaluation helpers of a fine-tuning project, run as `python -m evalpkg.generate`."""
