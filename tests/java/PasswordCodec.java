// Kafka's encoding of dynamic broker passwords (its EncryptingPasswordEncoder with the
// default settings: PBKDF2WithHmacSHA512, AES/CBC/PKCS5Padding, 128-bit key, 4096
// iterations, a 256-byte salt) done with the JDK's own crypto, as the Kafka broker does:
// the reference kafkarepl's server/password_encoder.py must agree with both ways.
// Usage: PasswordCodec encode SECRET PASSWORD | PasswordCodec decode SECRET ENCODED
import java.nio.charset.StandardCharsets;
import java.util.Base64;
import java.util.HashMap;
import java.util.Map;
import javax.crypto.Cipher;
import javax.crypto.SecretKeyFactory;
import javax.crypto.spec.IvParameterSpec;
import javax.crypto.spec.PBEKeySpec;
import javax.crypto.spec.SecretKeySpec;

public class PasswordCodec {
    static SecretKeySpec key(String secret, byte[] salt, int iterations, int bits, String factory) throws Exception {
        PBEKeySpec spec = new PBEKeySpec(secret.toCharArray(), salt, iterations, bits);
        return new SecretKeySpec(SecretKeyFactory.getInstance(factory).generateSecret(spec).getEncoded(), "AES");
    }

    public static void main(String[] args) throws Exception {
        String secret = args[1], value = args[2];
        Base64.Encoder b64 = Base64.getEncoder();
        Base64.Decoder unb64 = Base64.getDecoder();
        if (args[0].equals("encode")) {
            byte[] salt = new byte[256];
            new java.security.SecureRandom().nextBytes(salt);
            Cipher cipher = Cipher.getInstance("AES/CBC/PKCS5Padding");
            cipher.init(Cipher.ENCRYPT_MODE, key(secret, salt, 4096, 128, "PBKDF2WithHmacSHA512"));
            byte[] encrypted = cipher.doFinal(value.getBytes(StandardCharsets.UTF_8));
            byte[] iv = cipher.getParameters().getParameterSpec(IvParameterSpec.class).getIV();
            System.out.println("keyFactoryAlgorithm:PBKDF2WithHmacSHA512,cipherAlgorithm:AES/CBC/PKCS5Padding,"
                    + "keyLength:128,salt:" + b64.encodeToString(salt) + ",iterations:4096,encryptedPassword:"
                    + b64.encodeToString(encrypted) + ",passwordLength:" + value.length()
                    + ",initializationVector:" + b64.encodeToString(iv));
        } else {
            Map<String, String> m = new HashMap<>();
            for (String part : value.split(",")) {
                int colon = part.indexOf(':');
                m.put(part.substring(0, colon), part.substring(colon + 1));
            }
            Cipher cipher = Cipher.getInstance(m.get("cipherAlgorithm"));
            cipher.init(Cipher.DECRYPT_MODE,
                    key(secret, unb64.decode(m.get("salt")), Integer.parseInt(m.get("iterations")),
                        Integer.parseInt(m.get("keyLength")), m.get("keyFactoryAlgorithm")),
                    new IvParameterSpec(unb64.decode(m.get("initializationVector"))));
            System.out.println(new String(cipher.doFinal(unb64.decode(m.get("encryptedPassword"))),
                    StandardCharsets.UTF_8));
        }
    }
}
