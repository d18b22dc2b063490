"""The ledger (`results/ledger/`): what was scored and every time labels were opened. docs/design.md §7.

Its concerns, one module each:

- `records`: one immutable, self-hashing JSON record per scoring job;
- `openings`: the hash-chained openings.csv, its lock, in-flight reservations and budgets;
- `scores_table`: scores.csv and scores.parquet rebuilt from the records;
- `verify`: the whole ledger checked, and the `python -m evaluate.ledger` command;
- `scoring`: scoring on the record: the one way a job opens labels, and a whole scoring (reuse, opening, record);
- `reuse`: the reuse keys and kept records that let a re-run on the same inputs open no labels.

The measures inside a record (per-image statistics, bootstrap) live with the scores, in `evaluate.scores.measures`.
"""

from evaluate import EvaluationError


class LedgerError(EvaluationError):
    """The ledger is inconsistent (edited record, broken chain) or a write would break it; names the file/row."""


class BudgetExceeded(LedgerError):
    """A sealed data set's labels were opened as often as its budget allows."""
