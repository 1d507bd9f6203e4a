"""Calibration: the constants real servers add to the roofline step, fitted from real runs."""
