package lakehouse;

import java.util.Set;

import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.SparkSessionExtensions;
import org.apache.spark.sql.catalyst.analysis.ResolvedTable;
import org.apache.spark.sql.catalyst.plans.logical.Command;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.execution.datasources.HadoopFsRelation;
import org.apache.spark.sql.execution.datasources.LogicalRelation;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation;

import scala.Function1;
import scala.runtime.BoxedUnit;

/**
 * A Spark check rule that keeps sessions read-only: only reading statements run.
 *
 * A session is read-only when its conf has `spark.lakehouse.readOnly=true` (`lakehouse sql`),
 * or when the Spark conf has `spark.lakehouse.server.readOnly=true` (`lakehouse serve`).
 * It judges the analysed plan of every statement before anything runs: commands other than
 * SHOW, DESCRIBE, EXPLAIN and USE are refused (writes, DDL, SET, ADD JAR, CREATE FUNCTION,
 * CACHE ...), and so are TRANSFORM ... USING (a shell command), reflect/java_method calls, Hive
 * UDFs (code from a JAR), and path-named tables and files outside `spark.lakehouse.home` and the
 * warehouse (`spark.sql.warehouse.dir`, a bucket's prefix when the tables are on S3), also
 * when a reading command (DESCRIBE, SHOW, DESCRIBE HISTORY) names them. Python's `lakehouse sql` and the JDBC server of `lakehouse serve` load
 * the same rule, so one rule decides for both. tables/readonly.py builds and loads it.
 */
public final class ReadOnlyGuard implements Function1<SparkSessionExtensions, BoxedUnit> {
  public static final String READ_ONLY_CONF = "spark.lakehouse.readOnly";
  public static final String SERVER_READ_ONLY_CONF = "spark.lakehouse.server.readOnly";
  public static final String HOME_CONF = "spark.lakehouse.home";
  /** Spark's static warehouse setting: the tables' root, an `s3a://` URI when they are on S3. */
  public static final String WAREHOUSE_CONF = "spark.sql.warehouse.dir";
  public static final String PREFIX = "LAKEHOUSE_READ_ONLY: ";

  private static final Set<String> READING_COMMANDS = Set.of(
      "ShowTables", "ShowTablesCommand", "ShowTableExtended", "ShowNamespaces",
      "ShowNamespacesCommand", "ShowCatalogsCommand", "ShowCurrentNamespaceCommand",
      "ShowViews", "ShowViewsCommand", "ShowColumns", "ShowColumnsCommand",
      "ShowDeltaTableColumnsCommand", "ShowTableProperties", "ShowTablePropertiesCommand",
      "ShowCreateTable", "ShowCreateTableCommand", "ShowFunctions", "ShowFunctionsCommand",
      "ShowPartitions", "ShowPartitionsCommand", "ShowDeltaPartitionsCommand",
      "DescribeRelation", "DescribeTableCommand", "DescribeColumn", "DescribeColumnCommand",
      "DescribeNamespace", "DescribeNamespaceCommand", "DescribeFunction",
      "DescribeFunctionCommand", "DescribeQueryCommand", "DescribeDeltaDetailCommand",
      "DescribeDeltaHistory", "DescribeDeltaHistoryCommand", "ExplainCommand",
      "SetCatalogAndNamespace", "SetNamespaceCommand", "ListJarsCommand", "ListFilesCommand");
  /** Commands that only describe another plan: it is not run, so it is not judged. */
  private static final Set<String> EXPLAINING = Set.of("ExplainCommand", "DescribeQueryCommand");
  private static final Set<String> JVM_FUNCTIONS = Set.of(
      "CallMethodViaReflection", "TryReflect");
  /** Functions whose code comes from a JAR a function definition names: loaded like ADD JAR. */
  private static final Set<String> JAR_FUNCTIONS = Set.of(
      "HiveSimpleUDF", "HiveGenericUDF", "HiveGenericUDTF", "HiveUDAFFunction");
  /** Plan nodes that are not commands but run an external program. */
  private static final Set<String> EXTERNAL_PROGRAMS = Set.of("ScriptTransformation");
  /** A path-named table's name, as Spark and Delta print it: format.`path`. */
  /** A URI with an authority: scheme, authority (a bucket), path. */
  private static final java.util.regex.Pattern STORE_URI =
      java.util.regex.Pattern.compile("([A-Za-z][A-Za-z0-9+.-]*)://([^/]*)(.*)");
  private static final java.util.regex.Pattern PATH_TABLE =
      java.util.regex.Pattern.compile("[A-Za-z_][A-Za-z0-9_]*\\.`(.+)`");

  @Override
  public BoxedUnit apply(SparkSessionExtensions extensions) {
    Function1<SparkSession, Function1<LogicalPlan, BoxedUnit>> builder =
        session -> plan -> {
          if (isReadOnly(session)) {
            check(plan, rootsOf(session));
          }
          return BoxedUnit.UNIT;
        };
    extensions.injectCheckRule(builder);
    // Paths a statement names are judged as it is parsed, before Spark looks at them.
    extensions.injectParser((session, delegate) -> new ReadOnlyParser(session, delegate));
    return BoxedUnit.UNIT;
  }

  /** The places a read-only session may read: the home and the warehouse. */
  static String[] rootsOf(SparkSession session) {
    org.apache.spark.SparkConf conf = session.sparkContext().getConf();
    return new String[] {conf.get(HOME_CONF, ""), conf.get(WAREHOUSE_CONF, "")};
  }

  /** Threads that stay writable under a read-only Spark conf: the server's own main thread. */
  private static final ThreadLocal<Boolean> TRUSTED = ThreadLocal.withInitial(() -> false);

  /**
   * Keep the calling thread writable under a read-only Spark conf: the server's own thread
   * registers the tables other processes create, while its clients' statements run on the
   * JDBC server's threads.
   */
  public static void trustThisThread() {
    TRUSTED.set(true);
  }

  /**
   * Read-only when this session's own conf says so (`lakehouse sql`), or when the server's
   * Spark conf says so and the calling thread is not trusted. The server's setting is read from
   * the Spark conf, fixed at start: a JDBC client's session settings cannot turn it off.
   */
  static boolean isReadOnly(SparkSession session) {
    if ("true".equalsIgnoreCase(session.conf().get(READ_ONLY_CONF, "false"))) {
      return true;
    }
    boolean serverWide =
        "true".equalsIgnoreCase(
            session.sparkContext().getConf().get(SERVER_READ_ONLY_CONF, "false"));
    return serverWide && !TRUSTED.get();
  }

  /** Throw SecurityException naming what a read-only session may not run. */
  static void check(LogicalPlan root, String[] roots) {
    if (root instanceof Command && EXPLAINING.contains(simpleName(root))) {
      return;
    }
    root.foreach(node -> {
      inspect(node, roots);
      node.subqueries().foreach(sub -> {
        check(sub, roots);
        return BoxedUnit.UNIT;
      });
      return BoxedUnit.UNIT;
    });
  }

  private static String simpleName(Object node) {
    return node.getClass().getSimpleName().replace("$", "");
  }

  private static void inspect(LogicalPlan node, String[] roots) {
    String kind = simpleName(node);
    if (node instanceof Command && !READING_COMMANDS.contains(kind)) {
      refuse(kind + " (a write, DDL, SET, ADD JAR or another command)");
    }
    if (EXTERNAL_PROGRAMS.contains(kind)) {
      refuse("TRANSFORM ... USING (runs a shell command)");
    }
    node.expressions().foreach(expression -> {
      expression.foreach(e -> {
        String name = e.getClass().getSimpleName();
        if (JVM_FUNCTIONS.contains(name)) {
          refuse(e.prettyName() + " (calls JVM methods)");
        }
        if (JAR_FUNCTIONS.contains(name)) {
          refuse(e.prettyName() + " (a Hive UDF, runs code from a JAR)");
        }
        return BoxedUnit.UNIT;
      });
      return BoxedUnit.UNIT;
    });
    if (node instanceof LogicalRelation relation && relation.catalogTable().isEmpty()) {
      if (relation.relation() instanceof HadoopFsRelation files) {
        files.options().keys().foreach(key -> {
          if (isStoreOption(key)) {
            refuse("a per-query file-system option (" + key + ")");
          }
          return BoxedUnit.UNIT;
        });
        files.location().rootPaths().foreach(path -> {
          assertInside(locationOf(path), roots);
          return BoxedUnit.UNIT;
        });
      } else {
        assertInside(tablePathOf(relation.relation()), roots);
      }
    }
    if (node instanceof DataSourceV2Relation relation && relation.identifier().isEmpty()) {
      assertPathTableInside(relation.table(), roots);
    }
    if (node instanceof ResolvedTable resolved) {
      assertPathTableInside(resolved.table(), roots);
    }
    if (node instanceof Command) {
      // A reading command may hold its table as a field, not a child (DESCRIBE HISTORY).
      node.productIterator().foreach(field -> {
        Object value = field instanceof scala.Option<?> option && option.isDefined()
            ? option.get() : field;
        if (value instanceof Table table) {
          assertPathTableInside(table, roots);
        }
        return BoxedUnit.UNIT;
      });
    }
  }

  /** A path-named table (delta.`/x`) lies inside a root; a catalog table is not judged. */
  private static void assertPathTableInside(Table table, String[] roots) {
    java.util.regex.Matcher path = PATH_TABLE.matcher(table.name());
    if (path.matches()) {
      assertInside(path.group(1).replace("``", "`"), roots);
    }
  }

  /**
   * The table directory of a file relation that is not a HadoopFsRelation: Delta's change
   * feed by path (table_changes_by_path), found by its methods' names because Delta's JARs are
   * not on the guard's class path. Any other relation is refused: it cannot be placed.
   */
  private static String tablePathOf(Object relation) {
    try {
      Object schemaMode = relation.getClass().getMethod("snapshotWithSchemaMode").invoke(relation);
      Object snapshot = schemaMode.getClass().getMethod("snapshot").invoke(schemaMode);
      Object log = snapshot.getClass().getMethod("path").invoke(snapshot);
      return locationOf(((org.apache.hadoop.fs.Path) log).getParent());
    } catch (ReflectiveOperationException | ClassCastException | NullPointerException e) {
      refuse("a relation without a catalog table (" + simpleName(relation) + ")");
      return "";
    }
  }

  /**
   * True for a per-query option that reaches the file system's settings (`WITH ('fs.viewfs.
   * mounttable...' = ...)` mounts any directory under a path that looks like the home's).
   */
  static boolean isStoreOption(String key) {
    String lower = key.toLowerCase(java.util.Locale.ROOT);
    return lower.startsWith("fs.") || lower.startsWith("spark.") || lower.startsWith("hadoop.")
        || lower.startsWith("dfs.") || lower.contains("mounttable");
  }

  /** A Hadoop path as the guard compares it: decoded, with its store unless a local file. */
  private static String locationOf(org.apache.hadoop.fs.Path path) {
    java.net.URI uri = path.toUri();
    String scheme = uri.getScheme();
    if (scheme == null || "file".equalsIgnoreCase(scheme)) {
      return uri.getPath();
    }
    return scheme + "://" + (uri.getAuthority() == null ? "" : uri.getAuthority()) + uri.getPath();
  }

  /**
   * Refuse a location outside every root (the home, the warehouse). A local path is compared
   * normalized; a URI by its scheme, its authority (the bucket) and its normalized path, so a
   * path in another bucket or store never passes for one under a root.
   */
  static void assertInside(String location, String[] roots) {
    String placed = placeOf(location);
    for (String root : roots) {
      String base = placeOf(root);
      if (!base.isEmpty() && (placed.equals(base) || placed.startsWith(base + "/"))) {
        return;
      }
    }
    refuse("a file path outside the lakehouse home (" + location + ")");
  }

  /** `location` as one comparable string: `scheme://authority/path` or a local path. */
  static String placeOf(String location) {
    if (location.isEmpty()) {
      return "";
    }
    java.util.regex.Matcher uri = STORE_URI.matcher(location);
    if (uri.matches() && !"file".equalsIgnoreCase(uri.group(1))) {
      String path = java.nio.file.Path.of("/" + uri.group(3)).normalize().toString();
      return uri.group(1).toLowerCase(java.util.Locale.ROOT) + "://"
          + uri.group(2).toLowerCase(java.util.Locale.ROOT) + ("/".equals(path) ? "" : path);
    }
    return realPath(java.nio.file.Path.of(location.replaceFirst("^file:", "")));
  }

  /**
   * A local path with its symbolic links resolved: a link under the home that points elsewhere
   * is judged where it points. The part that does not exist (no link can be in it) is joined
   * to the real path of the longest part that does, then normalized.
   */
  static String realPath(java.nio.file.Path path) {
    java.nio.file.Path existing = path.toAbsolutePath();
    java.util.ArrayDeque<java.nio.file.Path> missing = new java.util.ArrayDeque<>();
    while (existing != null) {
      try {
        java.nio.file.Path real = existing.toRealPath();
        for (java.nio.file.Path part : missing) {
          real = real.resolve(part);
        }
        return real.normalize().toString();
      } catch (java.io.IOException | SecurityException e) {
        if (existing.getFileName() != null) {
          missing.push(existing.getFileName());
        }
        existing = existing.getParent();
      }
    }
    return path.toAbsolutePath().normalize().toString();
  }

  static void refuse(String what) {
    throw new SecurityException(PREFIX + what + " is refused in a read-only session");
  }
}
