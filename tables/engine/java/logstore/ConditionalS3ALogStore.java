package lakehouse;

import io.delta.storage.S3SingleDriverLogStore;
import java.io.ByteArrayOutputStream;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.InterruptedIOException;
import java.io.OutputStream;
import java.lang.reflect.Method;
import java.net.URI;
import java.net.URISyntaxException;
import java.nio.charset.StandardCharsets;
import java.util.Iterator;
import java.util.UUID;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Abortable;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;

/**
 * A Delta log store for {@code s3a://} tables that many writers share: each commit file is
 * written once, by one conditional PUT ({@code If-None-Match: *}), so a second writer of the same
 * version gets 412 and Delta retries at the next version, whichever process or engine it is.
 *
 * <p>The PUT carries a write id in the object's metadata ({@code x-amz-meta-lakehouse-write-id}).
 * When the PUT's outcome is ambiguous (the connection drops after the request was sent, or the
 * client's own retry of a PUT that landed gets 412 from it), the object is read back: our write
 * id means it landed and the write succeeds; another writer's object, or a 412, means the version
 * is taken ({@link java.nio.file.FileAlreadyExistsException}, Delta's signal to retry); no object
 * means it did not land ({@link CommitNotWrittenException}: the commit failed, a retry is safe).
 * A 409 ConditionalRequestConflict (a concurrent conditional write in flight) replays the PUT.
 *
 * <p>Listing, reading and {@code isPartialWriteVisible} (false) are those of Delta's S3 store.
 * Fault points for tests, set in the Hadoop configuration ({@code lakehouse.logstore.fault},
 * applied to the commit file named by {@code lakehouse.logstore.fault.file}):
 * {@code lost-response} (the PUT lands, then the call fails as a dropped connection) and
 * {@code not-sent} (the call fails before the PUT is sent).
 */
public class ConditionalS3ALogStore extends S3SingleDriverLogStore {

  public static final String WRITE_ID_HEADER = "lakehouse-write-id";
  public static final String FAULT_CONF = "lakehouse.logstore.fault";
  public static final String FAULT_FILE_CONF = "lakehouse.logstore.fault.file";
  static final String CONDITIONAL = "fs.option.create.conditional.overwrite";
  static final String HEADER_OPTION = "fs.s3a.create.header.";
  static final String HEADER_XATTR = "header.";
  static final int CONFLICT_ATTEMPTS = 5;

  public ConditionalS3ALogStore(Configuration hadoopConf) {
    super(hadoopConf);
  }

  @Override
  public void write(Path path, Iterator<String> actions, Boolean overwrite, Configuration conf)
      throws IOException {
    if (overwrite) {
      super.write(path, actions, true, conf); // _last_checkpoint and the like: last writer wins
      return;
    }
    FileSystem fs = path.getFileSystem(conf);
    Path target = stripUserInfo(fs.makeQualified(path));
    byte[] content = contentOf(actions);
    String writeId = UUID.randomUUID().toString();
    String fault = faultFor(conf, target);
    for (int attempt = 1; ; attempt++) {
      try {
        put(fs, target, content, writeId, fault);
        return;
      } catch (IOException failure) {
        String owner = ownerOf(fs, target);
        if (writeId.equals(owner)) {
          return; // it landed: the response, or our own retry's answer, was what failed
        }
        if (owner != null || isPreconditionFailed(failure)) {
          java.nio.file.FileAlreadyExistsException taken =
              new java.nio.file.FileAlreadyExistsException(target.toString());
          taken.initCause(failure);
          throw taken;
        }
        if (!isConflict(failure) || attempt >= CONFLICT_ATTEMPTS) {
          throw new CommitNotWrittenException(target.toString(), failure); // it did not land
        }
        pause(attempt);
      }
      fault = null; // an injected fault happens once
    }
  }

  /** One conditional PUT of the whole commit file, sent when the stream closes. */
  private static void put(FileSystem fs, Path target, byte[] content, String writeId, String fault)
      throws IOException {
    FSDataOutputStream out =
        (FSDataOutputStream)
            fs.createFile(target)
                .overwrite(false)
                .must(CONDITIONAL, true)
                .must(HEADER_OPTION + WRITE_ID_HEADER, writeId)
                .build();
    try {
      out.write(content);
      if ("not-sent".equals(fault)) {
        throw new IOException("injected fault: connection failed before the PUT was sent");
      }
    } catch (IOException | RuntimeException e) {
      abort(out);
      throw e;
    }
    out.close();
    if ("lost-response".equals(fault)) {
      throw new IOException("injected fault: connection reset after the PUT was sent");
    }
  }

  /** The write id on the object at `target`; "" if it has none; null if there is no object. */
  static String ownerOf(FileSystem fs, Path target) throws IOException {
    try {
      fs.getFileStatus(target);
    } catch (FileNotFoundException absent) {
      return null;
    }
    byte[] id = fs.getXAttr(target, HEADER_XATTR + WRITE_ID_HEADER);
    return id == null ? "" : new String(id, StandardCharsets.UTF_8);
  }

  static boolean isPreconditionFailed(Throwable failure) {
    for (Throwable t = failure; t != null; t = t.getCause()) {
      String name = t.getClass().getName();
      if (name.equals("org.apache.hadoop.fs.s3a.RemoteFileChangedException")
          || name.equals("org.apache.hadoop.fs.FileAlreadyExistsException")
          || statusCode(t) == 412) {
        return true;
      }
    }
    return false;
  }

  static boolean isConflict(Throwable failure) {
    for (Throwable t = failure; t != null; t = t.getCause()) {
      if (statusCode(t) == 409) {
        return true;
      }
    }
    return false;
  }

  /** The HTTP status an S3A or AWS SDK exception carries (`statusCode()`), else -1. */
  private static int statusCode(Throwable t) {
    try {
      Method method = t.getClass().getMethod("statusCode");
      Object code = method.invoke(t);
      return code instanceof Integer ? (Integer) code : -1;
    } catch (ReflectiveOperationException | RuntimeException e) {
      return -1;
    }
  }

  private static byte[] contentOf(Iterator<String> actions) {
    ByteArrayOutputStream buffer = new ByteArrayOutputStream();
    while (actions.hasNext()) {
      byte[] line = (actions.next() + "\n").getBytes(StandardCharsets.UTF_8);
      buffer.write(line, 0, line.length);
    }
    return buffer.toByteArray();
  }

  private static String faultFor(Configuration conf, Path target) {
    String fault = conf.get(FAULT_CONF);
    String file = conf.get(FAULT_FILE_CONF);
    if (fault == null || (file != null && !file.equals(target.getName()))) {
      return null;
    }
    return fault;
  }

  private static void abort(OutputStream out) {
    try {
      if (out instanceof Abortable) {
        ((Abortable) out).abort();
      } else {
        out.close();
      }
    } catch (IOException | RuntimeException ignored) {
      // the stream is being dropped; the original failure is what the caller hears
    }
  }

  private static void pause(int attempt) throws InterruptedIOException {
    try {
      Thread.sleep(100L * attempt);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new InterruptedIOException("interrupted between conditional PUT attempts");
    }
  }

  private static Path stripUserInfo(Path path) {
    URI uri = path.toUri();
    try {
      return new Path(
          new URI(
              uri.getScheme(),
              null,
              uri.getHost(),
              uri.getPort(),
              uri.getPath(),
              uri.getQuery(),
              uri.getFragment()));
    } catch (URISyntaxException e) {
      throw new IllegalArgumentException(e);
    }
  }
}
