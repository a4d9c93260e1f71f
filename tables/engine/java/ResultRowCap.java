package lakehouse;

import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.analysis.UnresolvedRelation;
import org.apache.spark.sql.catalyst.parser.ParseException;
import org.apache.spark.sql.catalyst.parser.ParserInterface;
import org.apache.spark.sql.catalyst.plans.logical.Command;
import org.apache.spark.sql.catalyst.plans.logical.CompoundPlanStatement;
import org.apache.spark.sql.catalyst.plans.logical.InsertIntoDir;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.ParsedStatement;

import scala.runtime.AbstractPartialFunction;

/**
 * The row cap of a read-only JDBC server: a client's query that would return more than
 * `spark.lakehouse.queries.maxRows` rows fails with one line instead of streaming them all.
 *
 * The Thrift server has no cap of its own, and its clients (beeline, BI tools) ask for whole
 * results. So the parser wraps each query statement of a client session (not a command, not a
 * view's text, not a subquery):
 * `SELECT * EXCEPT (n) FROM (SELECT *, count(1) OVER () AS n FROM (q LIMIT cap+1)) WHERE
 * if(n > cap, raise_error(...), true)`. At most cap+1 rows are computed; a result within the cap
 * comes back whole, with its columns and its order (the limit of a sorted query keeps its sort,
 * and the count needs no other); one past it fails the statement with the cap's line.
 */
final class ResultRowCap {
  static final String MAX_ROWS_CONF = "spark.lakehouse.queries.maxRows";
  private static final String STATEMENT = "__lakehouse_capped_statement";
  private static final String ROWS = "__lakehouse_result_rows";

  private ResultRowCap() {}

  /** `plan` wrapped in the cap when it is a JDBC client's query and a cap is set; else `plan`. */
  static LogicalPlan capped(SparkSession session, ParserInterface parser, LogicalPlan plan)
      throws ParseException {
    long cap = session.sparkContext().getConf().getLong(MAX_ROWS_CONF, 0L);
    // A cap from Integer.MAX_VALUE up is no cap: LIMIT takes an INT.
    if (cap <= 0 || cap >= Integer.MAX_VALUE || !ReadOnlyParser.isJdbcClientSession(session)) {
      return plan;
    }
    if (plan instanceof CompoundPlanStatement) {
      // A script's statements are parsed apart from this, where no cap reaches their results.
      ReadOnlyGuard.refuse("a SQL script (BEGIN ... END: the row cap cannot reach its results)");
    }
    if (!isQuery(plan)) {
      return plan;
    }
    String refusal = "the result has more than " + cap + " rows, the cap of a JDBC statement"
        + " ([lakehouse.queries] max_rows): narrow the query, aggregate, or add a LIMIT";
    LogicalPlan template = parser.parsePlan(
        "SELECT * EXCEPT (" + ROWS + ") FROM (SELECT *, count(1) OVER () AS " + ROWS
            + " FROM (SELECT * FROM " + STATEMENT + " LIMIT " + (cap + 1) + ")) WHERE if("
            + ROWS + " > " + cap + ", raise_error('" + refusal + "'), true)");
    return template.transformUp(new AbstractPartialFunction<LogicalPlan, LogicalPlan>() {
      @Override
      public boolean isDefinedAt(LogicalPlan node) {
        return isStatement(node);
      }

      @Override
      public LogicalPlan apply(LogicalPlan node) {
        return isStatement(node) ? plan : node;
      }
    });
  }

  /**
   * A statement that returns rows: not a command, a parsed DDL/DML statement, a script or an
   * INSERT OVERWRITE DIRECTORY (a write that is none of those). Anything else is a query shape
   * (SELECT, VALUES, TABLE, WITH, set operations, pipes) and is capped.
   */
  static boolean isQuery(LogicalPlan plan) {
    return !(plan instanceof Command) && !(plan instanceof ParsedStatement)
        && !(plan instanceof CompoundPlanStatement) && !(plan instanceof InsertIntoDir);
  }

  private static boolean isStatement(LogicalPlan node) {
    return node instanceof UnresolvedRelation relation
        && relation.multipartIdentifier().size() == 1
        && STATEMENT.equals(relation.multipartIdentifier().head());
  }
}
