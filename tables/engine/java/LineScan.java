package lakehouse;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Base64;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.io.compress.CompressionCodec;
import org.apache.hadoop.io.compress.CompressionCodecFactory;
import org.apache.spark.SparkEnv;

import scala.Tuple2;

/**
 * Finds the lines of a text file longer than a limit, in one streaming pass that never holds a
 * line in memory, and optionally copies the file without them.
 *
 * Spark's text reader reads a whole line into memory before anything can look at it, so one
 * line of a gigabyte kills the JVM. ingest/sources/oversized.py calls this through SQL's
 * `java_method` (a Spark job, one task per suspect file: a file larger than the limit, or
 * compressed) before the batch is read: a file with such lines is read from its copy instead,
 * and each long line becomes one quarantine row with its size and first bytes. Lines end as
 * Hadoop's LineReader ends them: at LF, CR or CRLF, or at a custom separator (`lineSep`).
 * The file is read through Hadoop's FileSystem with the session's `spark.hadoop.*` settings,
 * decompressed by the codec its name selects, as Spark's reader does.
 */
public final class LineScan {
  /** How many bytes of a long line are kept for its quarantine row. */
  public static final int HEAD_BYTES = 4096;
  private static final int BUFFER = 1 << 16;

  private LineScan() {}

  /**
   * The long lines of `file`: a JSON object with the file's path as Spark records it (`path`,
   * qualified and URL-encoded, as `_metadata.file_path`) and the lines (`long`, an array of
   * {line, offset, bytes, head (base64)}).
   */
  public static String oversized(String file, long maxBytes, String lineSep) throws IOException {
    return run(file, null, maxBytes, lineSep);
  }

  /**
   * The long lines of `file` as `oversized` says, with the file copied to `target` without
   * them (uncompressed; each kept line followed by the separator, `\n` by default).
   */
  public static String copyWithout(String file, String target, long maxBytes, String lineSep)
      throws IOException {
    return run(file, target, maxBytes, lineSep);
  }

  private static String run(String file, String target, long maxBytes, String lineSep)
      throws IOException {
    Configuration conf = hadoopConf();
    Path path = new Path(file);
    FileSystem fs = path.getFileSystem(conf);
    CompressionCodec codec = new CompressionCodecFactory(conf).getCodec(path);
    byte[] separator = lineSep == null || lineSep.isEmpty()
        ? null : lineSep.getBytes(StandardCharsets.UTF_8);
    String recorded = fs.makeQualified(path).toUri().toString();
    String found;
    try (InputStream raw = fs.open(path);
         InputStream in = codec == null ? raw : codec.createInputStream(raw)) {
      if (target == null) {
        found = new Scanner(maxBytes, separator, null).scan(in);
      } else {
        Path out = new Path(target);
        FileSystem outFs = out.getFileSystem(conf);
        try (OutputStream copy = outFs.create(out, true)) {
          found = new Scanner(maxBytes, separator, copy).scan(in);
        }
      }
    }
    return "{\"path\":" + quoted(recorded) + ",\"long\":" + found + "}";
  }

  /** A JSON string literal. */
  private static String quoted(String text) {
    StringBuilder out = new StringBuilder("\"");
    for (int i = 0; i < text.length(); i++) {
      char c = text.charAt(i);
      if (c == '"' || c == '\\') {
        out.append('\\').append(c);
      } else if (c < 0x20) {
        out.append(String.format("\\u%04x", (int) c));
      } else {
        out.append(c);
      }
    }
    return out.append('"').toString();
  }

  /** The session's Hadoop settings in a task (its `spark.hadoop.*` confs), else the defaults. */
  private static Configuration hadoopConf() {
    Configuration conf = new Configuration();
    SparkEnv env = SparkEnv.get();
    if (env == null) {
      return conf;
    }
    for (Tuple2<String, String> entry : env.conf().getAll()) {
      if (entry._1().startsWith("spark.hadoop.")) {
        conf.set(entry._1().substring("spark.hadoop.".length()), entry._2());
      }
    }
    return conf;
  }

  /** One pass over a stream: line lengths counted, long lines noted, the rest copied. */
  private static final class Scanner {
    private final long maxBytes;
    private final byte[] separator;
    private final int[] failure;
    private final OutputStream copy;
    private final StringBuilder found = new StringBuilder("[");
    private final ByteArrayOutputStream line = new ByteArrayOutputStream();
    private final byte[] head = new byte[HEAD_BYTES];
    private long offset;
    private long lineStart;
    private long lineBytes;
    private long lineNumber = 1;
    private int headBytes;
    private int matched;
    private boolean afterCr;
    private boolean any;

    Scanner(long maxBytes, byte[] separator, OutputStream copy) {
      this.maxBytes = maxBytes;
      this.separator = separator;
      this.failure = separator == null ? null : failureTable(separator);
      this.copy = copy;
    }

    String scan(InputStream in) throws IOException {
      byte[] buffer = new byte[BUFFER];
      int read;
      while ((read = in.read(buffer)) > 0) {
        for (int i = 0; i < read; i++) {
          accept(buffer[i]);
        }
      }
      if (separator != null && matched > 0) {
        for (int k = 0; k < matched; k++) {
          content(separator[k]);
        }
        matched = 0;
      }
      if (lineBytes > 0) {
        endLine(0);
      }
      return found.append(']').toString();
    }

    private void accept(byte b) throws IOException {
      offset++;
      if (separator == null) {
        if (afterCr) {
          afterCr = false;
          if (b == '\n') {
            lineStart = offset;
            return;
          }
        }
        if (b == '\n' || b == '\r') {
          afterCr = b == '\r';
          endLine(1);
          return;
        }
        content(b);
        return;
      }
      while (matched > 0 && separator[matched] != b) {
        int keep = failure[matched - 1];
        for (int k = 0; k < matched - keep; k++) {
          content(separator[k]);
        }
        matched = keep;
      }
      if (separator[matched] == b) {
        matched++;
        if (matched == separator.length) {
          matched = 0;
          endLine(separator.length);
        }
        return;
      }
      content(b);
    }

    private void content(byte b) {
      if (headBytes < HEAD_BYTES) {
        head[headBytes++] = b;
      }
      lineBytes++;
      if (copy != null && lineBytes <= maxBytes) {
        line.write(b);
      }
    }

    private void endLine(int terminator) throws IOException {
      if (lineBytes > maxBytes) {
        if (any) {
          found.append(',');
        }
        any = true;
        found.append("{\"line\":").append(lineNumber)
            .append(",\"offset\":").append(lineStart)
            .append(",\"bytes\":").append(lineBytes)
            .append(",\"head\":\"")
            .append(Base64.getEncoder().encodeToString(Arrays.copyOf(head, headBytes)))
            .append("\"}");
      } else if (copy != null) {
        line.writeTo(copy);
        copy.write(separator == null ? new byte[] {'\n'} : separator);
      }
      line.reset();
      lineNumber++;
      lineBytes = 0;
      headBytes = 0;
      lineStart = offset;
    }

    private static int[] failureTable(byte[] pattern) {
      int[] table = new int[pattern.length];
      int k = 0;
      for (int i = 1; i < pattern.length; i++) {
        while (k > 0 && pattern[i] != pattern[k]) {
          k = table[k - 1];
        }
        if (pattern[i] == pattern[k]) {
          k++;
        }
        table[i] = k;
      }
      return table;
    }
  }
}
