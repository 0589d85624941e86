"""The decision layer: the layout chosen per count (`layout_choice`), what each tier bills and what preemptions
cost (`billing`), the objective and limits asked for (`limits`), the recommendation (`recommend`), the
sentences that explain a finished one (`explain`) and the cost-time plot (`plot`). The physics below it
(layouts, memory, collectives) lives in advisor.topology, the batch arithmetic in advisor.batch."""
