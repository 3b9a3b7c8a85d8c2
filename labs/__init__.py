"""Shared code of the GRPO course labs: profiles, data, models, recipes, evaluation, curves, grading.

Notebooks import from here; nothing a lesson computes lives only in a notebook.
"""
