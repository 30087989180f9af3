"""Shared base of every stage: errors, safe file reads and atomic writes, YAML with line
numbers, unit spellings, numeric tolerances."""
