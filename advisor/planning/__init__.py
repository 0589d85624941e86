"""The decision layer: billing per tier (`billing`), the recommendation (`recommend`), the sentences
that explain it (`explain`) and the cost-time plot (`plot`)."""
