"""What a reader sees, from the ledger alone: tables (`tables`), figures (`figures`) and one report page
(`report`).
"""
