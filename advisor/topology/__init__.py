"""The physics of one training step in one parallel layout: what each collective sends over which
link (`collectives`), how a layout splits the step and its traffic (`layouts`), and what one GPU
holds (`memory`). Imports no scaling model, no prices and no planning: those sit above it."""
