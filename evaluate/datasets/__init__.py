"""Labelled data sets: COCO instances (`coco`) and DAVIS-layout videos (`davis`).
"""
