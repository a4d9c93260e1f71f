"""The project's own Spark settings, named once: the engine's modules and the guard share them.

`tables/engine/java/ReadOnlyGuard.java` reads the same names (its constants say so).
"""

from __future__ import annotations

#: The lakehouse home of a session: where its warehouse, checkpoints and logs live.
HOME_CONF = "spark.lakehouse.home"
#: The read-only guard's SQL extension class, loaded by every session the project builds.
GUARD_EXTENSION = "lakehouse.ReadOnlyGuard"
#: Marks a session read-only (`lakehouse sql`), and a whole server (`lakehouse serve`).
READ_ONLY_CONF = "spark.lakehouse.readOnly"
SERVER_READ_ONLY_CONF = "spark.lakehouse.server.readOnly"
#: Spark's `${...}` expansion in SQL text (the environment, system properties, confs): off in
#: every read-only session.
VARIABLE_SUBSTITUTION_CONF = "spark.sql.variable.substitute"
#: The JDBC server's login check (`java/TokenAuthenticator.java`), and the setting that names the
#: file holding the token it compares passwords with (a path: the token is in no setting).
TOKEN_AUTHENTICATOR = "lakehouse.TokenAuthenticator"
CUSTOM_AUTHENTICATION_CLASS = "hive.server2.custom.authentication.class"
SERVE_AUTH_FILE_CONF = "spark.lakehouse.serve.authFile"
#: The most rows a read-only JDBC server's client statement returns (`java/ResultRowCap.java`).
QUERIES_MAX_ROWS_CONF = "spark.lakehouse.queries.maxRows"
#: A remote stream's client lease, one setting per app id (`ingest.remote_lease`): renewed every
#: few seconds, so no cache keyed on a session's settings may count it.
REMOTE_LEASE_CONF_PREFIX = "spark.lakehouse.remote.lease."
