"""Calibration, in one home (issue 44): the calibrated constants and the fits that make them.

- :mod:`.values`: the constants every physics function reads (``catalogs/calibration.yaml``);
- :mod:`.serving`, :mod:`.serving_moe`: the serving fits against published measurements;
- :mod:`.training`, :mod:`.training_moe`: the training fits against published full runs.

Nothing is re-exported here: :mod:`.values` is imported by the physics itself, and the fits
import the physics, so a package that imported them all would import in a circle.
"""
