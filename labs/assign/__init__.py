"""The student notebooks, generated from the source notebooks by otter-grader's ``otter assign``.

``sources/`` holds one notebook per lesson with the solutions in place, between otter's markers
(``# BEGIN QUESTION`` ... ``# BEGIN SOLUTION`` ... ``# BEGIN TESTS`` ... ``# END QUESTION``, raw cells);
``notebooks/`` holds what a student opens: the same notebook with each solution replaced by a stub and each
question's tests replaced by a ``grader.check("name")`` cell. ``python -m labs notebooks`` rebuilds
``notebooks/``; ``--check`` only says which are out of date (``tests/test_student_notebooks.py`` runs it).
Never edit ``notebooks/`` by hand: edit the source and rebuild.
"""

from labs.assign.build import (SOURCES_DIR, STUDENT_DIR, generate, main, render, stale_notebooks,
                               write_student_notebooks)

__all__ = ["SOURCES_DIR", "STUDENT_DIR", "generate", "main", "render", "stale_notebooks",
           "write_student_notebooks"]
