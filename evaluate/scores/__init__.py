"""Scores of masks against labels (`masks`), the measures of a ledger record with their bootstrap intervals
(`measures`), the decoder's setting chosen on the select split (`selection`, with the select job's entry), the
decoder's masks scored on an eval data set (`decoder`, the score_decoder job's entry) and the agreement of two
readings' rankings (`agreement`).
"""
