"""The Delta-log room: what a table's log records and how the project reads and writes it.

Table DDL and details (`table`, `provision`), the app markers (`markers`), the ledger entry
(`ledger`) and the log's history read back (`history`), commits that carry an entry
(`commits`), the key range known per version (`key_range`), the ledger as a SQL view
(`ledger_view`), tables found under the warehouse (`warehouse`), the change feed (`changes`)
and maintenance (`maintenance`). Built on `tables.engine`.
"""
