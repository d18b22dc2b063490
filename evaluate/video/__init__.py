"""The video reading (docs/design.md §12): label propagation on DAVIS-layout sequences (`propagate`), the official
semi-supervised DAVIS measures (`measures`) and the scorer of a results folder (`score`, `python -m evaluate.video`).
"""
