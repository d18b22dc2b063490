"""Pure helpers below the networks and the data sets: the readings' geometry (`geometry`: patch, width, grids, the
feature shapes) and images (`images`: the tool's one opening rule, and the two transforms keys480 and tokens224).
Imports nothing of the project's but its errors, so `networks/`, `datasets/` and `readings/` all stand on it.
"""
