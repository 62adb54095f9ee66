"""Tools the model can call, one module each."""
