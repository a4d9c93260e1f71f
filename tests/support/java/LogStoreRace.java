import java.nio.charset.StandardCharsets;
import java.nio.file.FileAlreadyExistsException;
import java.util.Collections;
import lakehouse.CommitNotWrittenException;
import lakehouse.ConditionalS3ALogStore;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;

/**
 * One racer of the log store test: writes `<log>/<round>.json` for each round at the same
 * moment as the other racers (round r starts at `start + r * interval` ms) and prints one line
 * per round: `<round> WIN`, `<round> TAKEN` or `<round> FAILED <class>`.
 *
 * <p>Arguments: log directory (s3a://...), racer name, rounds, start (epoch ms), interval (ms),
 * and optionally a fault (`lost-response`, `not-sent`) for every write. The endpoint comes from
 * the system properties `endpoint`; credentials from the environment, as S3A reads them.
 */
public class LogStoreRace {
  public static void main(String[] args) throws Exception {
    String log = args[0];
    String racer = args[1];
    int rounds = Integer.parseInt(args[2]);
    long start = Long.parseLong(args[3]);
    long interval = Long.parseLong(args[4]);
    Configuration conf = new Configuration();
    conf.set("fs.s3a.endpoint", System.getProperty("endpoint"));
    conf.set("fs.s3a.endpoint.region", "us-east-1");
    conf.set("fs.s3a.path.style.access", "true");
    conf.set("fs.s3a.connection.ssl.enabled", "false");
    if (args.length > 5) {
      conf.set(ConditionalS3ALogStore.FAULT_CONF, args[5]);
    }
    ConditionalS3ALogStore store = new ConditionalS3ALogStore(conf);
    for (int round = 0; round < rounds; round++) {
      long wait = start + round * interval - System.currentTimeMillis();
      if (wait > 0) {
        Thread.sleep(wait);
      }
      Path file = new Path(String.format("%s/%020d.json", log, round));
      String line = "{\"racer\":\"" + racer + "\",\"round\":" + round + "}";
      String outcome;
      try {
        store.write(file, Collections.singletonList(line).iterator(), false, conf);
        outcome = "WIN";
      } catch (FileAlreadyExistsException e) {
        outcome = "TAKEN";
      } catch (CommitNotWrittenException e) {
        outcome = "NOT_WRITTEN";
      } catch (Exception e) {
        outcome = "FAILED " + e.getClass().getName() + ": " + e.getMessage();
      }
      System.out.println(round + " " + outcome);
      System.out.flush();
    }
    System.exit(0);
  }
}
