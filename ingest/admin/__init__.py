"""Operator actions on committed batches: replay or replace them, list and reset app markers."""
