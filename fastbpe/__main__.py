"""``python -m fastbpe``: the same command as the ``fastbpe`` console script."""
import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
