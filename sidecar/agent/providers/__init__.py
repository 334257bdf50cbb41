"""Model providers behind one async interface."""
