package lakehouse;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;

import javax.security.sasl.AuthenticationException;

import org.apache.hive.service.auth.PasswdAuthenticationProvider;
import org.apache.spark.SparkEnv;

/**
 * The JDBC server's login check: the password must be the token `lakehouse serve` made.
 *
 * `serve` writes a new token at each start to a file only its user can read (its path in
 * `spark.lakehouse.serve.authFile`, never the token itself in a setting), and starts Spark's
 * Thrift server with `hive.server2.authentication=CUSTOM` and this class. Any user name is
 * taken; the password is compared with the file's text in constant time, read at each login
 * (a file that cannot be read refuses every login).
 */
public final class TokenAuthenticator implements PasswdAuthenticationProvider {
  public static final String AUTH_FILE_CONF = "spark.lakehouse.serve.authFile";

  @Override
  public void Authenticate(String user, String password) throws AuthenticationException {
    byte[] expected = expectedToken();
    byte[] given = (password == null ? "" : password).getBytes(StandardCharsets.UTF_8);
    if (expected.length == 0 || !MessageDigest.isEqual(expected, given)) {
      throw new AuthenticationException(
          "lakehouse serve: the password is not this server's token (see its serving line)");
    }
  }

  private static byte[] expectedToken() {
    String file = SparkEnv.get() == null ? null : SparkEnv.get().conf().get(AUTH_FILE_CONF, null);
    if (file == null) {
      return new byte[0];
    }
    try {
      return Files.readString(Path.of(file), StandardCharsets.UTF_8).strip()
          .getBytes(StandardCharsets.UTF_8);
    } catch (IOException e) {
      return new byte[0];
    }
  }
}
