"""isl-only helpers below every stage that reasons in the polyhedral model: named operations on
isl sets, maps and schedules (`isl_helpers.py`) and the operation budgets that bound each isl
step (`budget.py`). Nothing here imports MLIR: the schedule stage, and the coming
differentiation and GPU mapping, build their models and hand isl objects in."""
