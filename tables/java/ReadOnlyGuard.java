package lakehouse;

import java.util.Set;

import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.SparkSessionExtensions;
import org.apache.spark.sql.catalyst.plans.logical.Command;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.execution.datasources.HadoopFsRelation;
import org.apache.spark.sql.execution.datasources.LogicalRelation;
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
 * CACHE ...), and so are reflect/java_method calls and file relations outside
 * `spark.lakehouse.home`. Python's `lakehouse sql` and the JDBC server of `lakehouse serve` load
 * the same rule, so one rule decides for both. tables/readonly.py builds and loads it.
 */
public final class ReadOnlyGuard implements Function1<SparkSessionExtensions, BoxedUnit> {
  public static final String READ_ONLY_CONF = "spark.lakehouse.readOnly";
  public static final String SERVER_READ_ONLY_CONF = "spark.lakehouse.server.readOnly";
  public static final String HOME_CONF = "spark.lakehouse.home";
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

  @Override
  public BoxedUnit apply(SparkSessionExtensions extensions) {
    Function1<SparkSession, Function1<LogicalPlan, BoxedUnit>> builder =
        session -> plan -> {
          if (isReadOnly(session)) {
            check(plan, session.sparkContext().getConf().get(HOME_CONF, ""));
          }
          return BoxedUnit.UNIT;
        };
    extensions.injectCheckRule(builder);
    return BoxedUnit.UNIT;
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
  static void check(LogicalPlan root, String home) {
    if (root instanceof Command && EXPLAINING.contains(simpleName(root))) {
      return;
    }
    root.foreach(node -> {
      inspect(node, home);
      node.subqueries().foreach(sub -> {
        check(sub, home);
        return BoxedUnit.UNIT;
      });
      return BoxedUnit.UNIT;
    });
  }

  private static String simpleName(Object node) {
    return node.getClass().getSimpleName().replace("$", "");
  }

  private static void inspect(LogicalPlan node, String home) {
    if (node instanceof Command && !READING_COMMANDS.contains(simpleName(node))) {
      refuse(simpleName(node) + " (a write, DDL, SET, ADD JAR or another command)");
    }
    node.expressions().foreach(expression -> {
      expression.foreach(e -> {
        String name = e.getClass().getSimpleName();
        if (JVM_FUNCTIONS.contains(name)) {
          refuse(e.prettyName() + " (calls JVM methods)");
        }
        return BoxedUnit.UNIT;
      });
      return BoxedUnit.UNIT;
    });
    if (node instanceof LogicalRelation relation
        && relation.relation() instanceof HadoopFsRelation files
        && relation.catalogTable().isEmpty()) {
      files.location().rootPaths().foreach(path -> {
        assertInside(path.toUri().getPath(), home);
        return BoxedUnit.UNIT;
      });
    }
    if (node instanceof DataSourceV2Relation relation) {
      String name = relation.table().name();
      int start = name.indexOf(".`");
      if (start >= 0 && name.endsWith("`") && relation.identifier().isEmpty()) {
        assertInside(name.substring(start + 2, name.length() - 1), home);
      }
    }
  }

  private static void assertInside(String path, String home) {
    String normalized = java.nio.file.Path.of(path.replaceFirst("^file:", "")).normalize()
        .toString();
    if (home.isEmpty() || !(normalized.equals(home) || normalized.startsWith(home + "/"))) {
      refuse("a file path outside the lakehouse home (" + path + ")");
    }
  }

  private static void refuse(String what) {
    throw new SecurityException(PREFIX + what + " is refused in a read-only session");
  }
}
