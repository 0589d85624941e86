"""`python -m advisor` runs the same CLI as the `advisor` console script."""

from advisor.cli import main

main()
