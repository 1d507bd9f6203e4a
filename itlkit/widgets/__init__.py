"""ipywidgets wiring: controls that update plotly FigureWidgets in place (only layer importing ipywidgets)."""
