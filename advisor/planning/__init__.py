"""The decision layer: the batch a plan trains with (`batch`), what each tier bills and what preemptions
cost (`billing`), the objective and limits asked for (`limits`), the recommendation (`recommend`), the
sentences that explain a finished one (`explain`) and the cost-time plot (`plot`). Memory per GPU lives
in advisor.memory (layouts use it too)."""
