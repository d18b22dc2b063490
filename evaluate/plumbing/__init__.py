"""Shared plumbing of every stage: where files live (`paths`), writing them whole (`atomic`), where a number
came from (`provenance`) and the config's checkpoint and data-set tables and the values a job reads of it when it
runs (`config`). Imports nothing of the
project's but `evaluate`'s errors.
"""
