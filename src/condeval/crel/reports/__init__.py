"""Tables and figures, one module per paper track."""
