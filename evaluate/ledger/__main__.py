"""`python -m evaluate.ledger verify|rebuild [results/ledger]`: see `evaluate.ledger.verify`."""

import sys

from evaluate.ledger.verify import main

sys.exit(main())
