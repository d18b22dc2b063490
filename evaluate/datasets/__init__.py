"""Labelled data sets: COCO instances (`coco`) and DAVIS-layout videos (`davis`); semantic-segmentation sets in
their published layouts (`cocostuff`, `cityscapes`, `potsdam`, `label_folder`; what they share: `semantic`; by name:
`semantic_kinds`).
"""
