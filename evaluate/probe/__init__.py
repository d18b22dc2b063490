"""The linear probe on tokens224: label maps, patch labels, the fit and its scores (`linear`); trained and scored on
the record, the entries of its jobs (`protocol`).
"""
