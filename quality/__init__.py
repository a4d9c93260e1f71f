"""Quality layer: malformed-row classification and quarantine (audits and suites build on it)."""
