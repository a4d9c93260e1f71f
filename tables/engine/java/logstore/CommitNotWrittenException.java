package lakehouse;

import java.io.IOException;

/**
 * A commit file that the conditional log store knows it did not write: the PUT failed and no
 * object is at its path. The commit did not happen, so a retry is safe (the batch's commit is
 * retried as a transient failure).
 */
public class CommitNotWrittenException extends IOException {
  public CommitNotWrittenException(String path, Throwable cause) {
    super("commit file " + path + " was not written: " + cause, cause);
  }
}
