import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import lakehouse.ConditionalS3ALogStore;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;

/**
 * Lists a log directory from each given start file through the conditional log store, with
 * Delta's fast S3A listing (`delta.enableFastS3AListFrom`) on or off, and prints one line per
 * start: `<start> <LIST requests, continued pages included> <name>:<length>,...` (the files
 * listFrom returned, in order).
 *
 * <p>Arguments: log directory (s3a://...), `fast` or `full`, then the start file names. The
 * endpoint comes from the system property `endpoint`; credentials from the environment.
 */
public class LogStoreListing {
  public static void main(String[] args) throws Exception {
    Path log = new Path(args[0]);
    Configuration conf = new Configuration();
    conf.set("fs.s3a.endpoint", System.getProperty("endpoint"));
    conf.set("fs.s3a.endpoint.region", "us-east-1");
    conf.set("fs.s3a.path.style.access", "true");
    conf.set("fs.s3a.connection.ssl.enabled", "false");
    conf.set("fs.s3a.paging.maximum", "1000"); // S3 returns at most 1,000 keys a page
    conf.set("delta.enableFastS3AListFrom", String.valueOf(args[1].equals("fast")));
    ConditionalS3ALogStore store = new ConditionalS3ALogStore(conf);
    FileSystem fs = log.getFileSystem(conf);
    for (int i = 2; i < args.length; i++) {
      long before = listRequests(fs);
      Iterator<FileStatus> listed = store.listFrom(new Path(log, args[i]), conf);
      List<String> names = new ArrayList<>();
      while (listed.hasNext()) {
        FileStatus status = listed.next();
        names.add(status.getPath().getName() + ":" + status.getLen());
      }
      System.out.println(args[i] + " " + (listRequests(fs) - before) + " " + String.join(",", names));
    }
    System.out.flush();
    System.exit(0);
  }

  /** LIST requests so far: first pages and continued ones. */
  private static long listRequests(FileSystem fs) {
    long total = 0;
    for (String name : new String[] {"object_list_request", "object_continue_list_request"}) {
      Long count = fs.getStorageStatistics().getLong(name);
      total += count == null ? 0 : count;
    }
    return total;
  }
}
