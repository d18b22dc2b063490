"""Scores of masks against labels (`masks`), the measures of a ledger record with their bootstrap intervals
(`measures`), the decoder's setting chosen on the select split (`selection`) and the agreement of two readings'
rankings (`agreement`).
"""
