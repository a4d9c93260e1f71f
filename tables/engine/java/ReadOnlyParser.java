package lakehouse;

import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.FunctionIdentifier;
import org.apache.spark.sql.catalyst.TableIdentifier;
import org.apache.spark.sql.catalyst.analysis.UnresolvedRelation;
import org.apache.spark.sql.catalyst.analysis.UnresolvedTable;
import org.apache.spark.sql.catalyst.analysis.UnresolvedTableOrView;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.parser.ParameterContext;
import org.apache.spark.sql.catalyst.parser.ParseException;
import org.apache.spark.sql.catalyst.parser.ParserInterface;
import org.apache.spark.sql.catalyst.plans.logical.InsertIntoStatement;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructType;

import scala.collection.immutable.Seq;
import scala.runtime.BoxedUnit;

/**
 * The read-only guard's first look: a path a statement names is judged as the statement is
 * parsed, before Spark touches the path.
 *
 * The check rule (`ReadOnlyGuard`) judges the analysed plan, but analysing `json.`/x`` already
 * lists `/x`: a missing path answered PATH_NOT_FOUND and an existing one the guard's refusal,
 * which told any analyst whether a file outside the home exists. This parser wraps the
 * session's own (Delta's): in a read-only session, every table name of the parsed statement
 * whose last part is a path (`format.`path``, `delta.`path``; in subqueries and WITH clauses
 * too) must lie inside the home or the warehouse, after its symbolic links are resolved, or the
 * statement is refused with the same line whether the path exists or not. A JDBC client's
 * query is wrapped in the row cap (`ResultRowCap`). Everything else is the delegate's.
 */
public final class ReadOnlyParser implements ParserInterface {
  private final SparkSession session;
  private final ParserInterface delegate;

  public ReadOnlyParser(SparkSession session, ParserInterface delegate) {
    this.session = session;
    this.delegate = delegate;
  }

  @Override
  public LogicalPlan parsePlan(String sqlText) throws ParseException {
    return ResultRowCap.capped(session, delegate, judged(delegate.parsePlan(sqlText)));
  }

  @Override
  public LogicalPlan parsePlanWithParameters(String sqlText, ParameterContext parameters)
      throws ParseException {
    LogicalPlan plan = judged(delegate.parsePlanWithParameters(sqlText, parameters));
    return ResultRowCap.capped(session, delegate, plan);
  }

  @Override
  public LogicalPlan parseQuery(String sqlText) throws ParseException {
    return judged(delegate.parseQuery(sqlText));
  }

  @Override
  public Expression parseExpression(String sqlText) throws ParseException {
    return delegate.parseExpression(sqlText);
  }

  @Override
  public TableIdentifier parseTableIdentifier(String sqlText) throws ParseException {
    return delegate.parseTableIdentifier(sqlText);
  }

  @Override
  public FunctionIdentifier parseFunctionIdentifier(String sqlText) throws ParseException {
    return delegate.parseFunctionIdentifier(sqlText);
  }

  @Override
  public Seq<String> parseMultipartIdentifier(String sqlText) throws ParseException {
    return delegate.parseMultipartIdentifier(sqlText);
  }

  @Override
  public StructType parseRoutineParam(String sqlText) throws ParseException {
    return delegate.parseRoutineParam(sqlText);
  }

  @Override
  public StructType parseTableSchema(String sqlText) throws ParseException {
    return delegate.parseTableSchema(sqlText);
  }

  @Override
  public DataType parseDataType(String sqlText) throws ParseException {
    return delegate.parseDataType(sqlText);
  }

  private LogicalPlan judged(LogicalPlan plan) {
    if (ReadOnlyGuard.isReadOnly(session)) {
      assertNoConnectionSettings(session);
      judge(plan, ReadOnlyGuard.rootsOf(session));
    }
    return plan;
  }

  /**
   * A JDBC client may set session settings in its connection URL (`jdbc:hive2://h:p/db?k=v`),
   * which the Thrift server applies as the session opens, where no statement (and so no SET
   * refusal) sees them: `spark.sql.variable.substitute=true` would expand `${env:...}` again, a
   * `spark.sql.catalog.*` would add a catalog whose tables no path check sees. Under a
   * read-only server every statement of a session whose guarded settings (`isGuardedSetting`)
   * differ from the server's own session's is refused, naming the first such key.
   */
  static void assertNoConnectionSettings(SparkSession session) {
    if (!isJdbcClientSession(session)) {
      return;
    }
    SparkSession base = SparkSession.getDefaultSession().get();
    scala.collection.immutable.Map<String, String> served = base.conf().getAll();
    session.conf().getAll().foreach(entry -> {
      String key = entry._1();
      scala.Option<String> own = served.get(key);
      if (isGuardedSetting(key) && !(own.isDefined() && own.get().equals(entry._2()))) {
        ReadOnlyGuard.refuse("a session setting from the connection (" + key + ")");
      }
      return BoxedUnit.UNIT;
    });
  }

  /**
   * True for a client's session on a read-only JDBC server: the server's own session (the one
   * each client session is opened from) is not one.
   */
  static boolean isJdbcClientSession(SparkSession session) {
    org.apache.spark.SparkConf server = session.sparkContext().getConf();
    if (!"true".equalsIgnoreCase(server.get(ReadOnlyGuard.SERVER_READ_ONLY_CONF, "false"))) {
      return false;
    }
    scala.Option<SparkSession> base = SparkSession.getDefaultSession();
    return base.isDefined() && base.get() != session;
  }

  /**
   * The settings a connection may not bring: what the guard relies on (variable substitution,
   * the project's own switches), what reaches the file systems (`spark.hadoop.*`), and catalogs
   * (a catalog's tables are judged by no path check). Other settings change how a query runs,
   * not what it may read, and Spark and Delta set some per session themselves.
   */
  static boolean isGuardedSetting(String key) {
    return key.equals("spark.sql.variable.substitute") || key.startsWith("spark.sql.catalog.")
        || key.startsWith("spark.lakehouse.") || key.startsWith("spark.hadoop.");
  }

  /**
   * Judge every path-named table of `plan`, its WITH clauses' plans, its subqueries and an
   * INSERT's target (`INSERT INTO parquet.`/x``: Spark looks the target up before any check).
   */
  static void judge(LogicalPlan plan, String[] roots) {
    plan.foreach(node -> {
      Seq<String> name = nameOf(node);
      if (name != null && name.size() >= 2 && isPath(name.last())) {
        ReadOnlyGuard.assertInside(name.last(), roots);
      }
      if (node instanceof InsertIntoStatement insert) {
        judge(insert.table(), roots);  // the target is no child: judged here, not by a lookup
      }
      node.innerChildren().foreach(inner -> {
        if (inner instanceof LogicalPlan innerPlan) {
          judge(innerPlan, roots);
        }
        return BoxedUnit.UNIT;
      });
      node.subqueries().foreach(sub -> {
        judge(sub, roots);
        return BoxedUnit.UNIT;
      });
      return BoxedUnit.UNIT;
    });
  }

  private static Seq<String> nameOf(LogicalPlan node) {
    if (node instanceof UnresolvedRelation relation) {
      return relation.multipartIdentifier();
    }
    if (node instanceof UnresolvedTable table) {
      return table.multipartIdentifier();
    }
    if (node instanceof UnresolvedTableOrView table) {
      return table.multipartIdentifier();
    }
    return null;
  }

  /** A name part that is a location (`/x`, `s3a://b/x`, `file:x`), not a table's name. */
  static boolean isPath(String part) {
    return part.indexOf('/') >= 0 || part.indexOf(':') >= 0 || part.indexOf('\\') >= 0;
  }
}
