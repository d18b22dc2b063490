"""Labelled data sets: COCO instances (`coco`).
"""
