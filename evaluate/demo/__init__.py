"""The embedded demo: procedurally drawn scenes (`scenes`) and seeded random checkpoints (`checkpoints`).
"""
