"""ipywidgets wiring: controls that update plotly FigureWidgets in place.

The only layer that imports ipywidgets. One explorer per notebook: `decode.DecodeExplorer`,
`scheduler.SchedulerExplorer`, `histogram.HistogramExplorer`, `postmortem.PostmortemExplorer`,
`drill.InterviewDrill`; `_deployment` and `_style` hold the controls they share.
"""

__all__ = ["decode", "drill", "histogram", "postmortem", "scheduler"]
