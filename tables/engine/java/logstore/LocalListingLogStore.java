package lakehouse;

import io.delta.storage.HDFSLogStore;
import java.io.File;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.Iterator;
import java.util.List;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;

/**
 * Delta's log store for {@code file:} tables, with a listing that reads file names before
 * anything else about them.
 *
 * <p>Delta lists a table's {@code _delta_log} from its last checkpoint at every snapshot update
 * (a commit updates it about three times). Delta's store does this with {@code
 * FileSystem.listStatus} of the whole directory, which on a local disk builds a status (a stat
 * call and its objects) for every file the log has ever kept, four per commit with Hadoop's
 * {@code .crc} files, and then drops all but the newest few: a stream's commit grows slower with
 * the length of its log (docs/benchmarks.md, "A long run"). This store lists the names, keeps
 * those at or after the start, and builds the status of those only. What it returns is what
 * Delta's own listing returns: the same files (checksum files excluded, as the local file system
 * excludes them), the same statuses, sorted by name; a directory that is missing is {@link
 * FileNotFoundException}, as there. Writing, reading and every other file system are Delta's
 * {@link HDFSLogStore}'s, unchanged.
 */
public class LocalListingLogStore extends HDFSLogStore {

  public LocalListingLogStore(Configuration hadoopConf) {
    super(hadoopConf);
  }

  @Override
  public Iterator<FileStatus> listFrom(Path path, Configuration hadoopConf) throws IOException {
    FileSystem fs = path.getFileSystem(hadoopConf);
    File directory = localDirectory(fs, path.getParent());
    if (directory == null) {
      return super.listFrom(path, hadoopConf);
    }
    String[] names = directory.list();
    if (names == null) {
      if (!fs.exists(path.getParent())) {
        throw new FileNotFoundException("No such file or directory: " + path.getParent());
      }
      throw new IOException("cannot list " + directory);
    }
    String start = path.getName();
    List<FileStatus> found = new ArrayList<>();
    for (String name : names) {
      if (name.compareTo(start) < 0 || isChecksumFile(name)) {
        continue;
      }
      try {
        found.add(fs.getFileStatus(new Path(path.getParent(), new Path(null, null, name))));
      } catch (FileNotFoundException removed) {
        // removed since the names were read (the log's clean-up), as listStatus skips it too
      }
    }
    found.sort(Comparator.comparing(status -> status.getPath().getName()));
    return found.iterator();
  }

  /** The directory on the local disk behind {@code directory}; null on any other file system. */
  static File localDirectory(FileSystem fs, Path directory) {
    if (fs instanceof LocalFileSystem) {
      return ((LocalFileSystem) fs).pathToFile(directory);
    }
    if (fs instanceof RawLocalFileSystem) {
      return ((RawLocalFileSystem) fs).pathToFile(directory);
    }
    return null;
  }

  /** Hadoop's own checksum files ({@code .name.crc}), which the local file system hides. */
  static boolean isChecksumFile(String name) {
    return name.startsWith(".") && name.endsWith(".crc");
  }
}
