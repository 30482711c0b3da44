#include "s3/aws_config.h"

#include <fstream>

#include "s3/json_fields.h"
#include "s3/s3_writer.h"
#include "s3/url.h"
#include "s3/xml.h"
#include "test_util.h"

namespace rckpt::s3 {
namespace {

using ::testing::HasSubstr;

void WriteText(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

TEST(S3UrlTest, ParsesBucketAndKey) {
  ASSERT_OK_AND_ASSIGN(S3Url u, ParseS3Url("s3://ckpts/run 1/a+b=c/\xc3\xbc.rckpt"));
  EXPECT_EQ(u.bucket, "ckpts");
  EXPECT_EQ(u.key, "run 1/a+b=c/\xc3\xbc.rckpt");
  EXPECT_EQ(u.ToString(), "s3://ckpts/run 1/a+b=c/\xc3\xbc.rckpt");
}

TEST(S3UrlTest, RefusesUrlsWithoutBucketOrKeyNamingTheExpectedForm) {
  EXPECT_THAT(ParseS3Url("s3://"), StatusIs(StatusCode::kInvalidArgument,
                                            "'s3://' names no bucket: expected s3://BUCKET/KEY"));
  EXPECT_THAT(ParseS3Url("s3://bucket"),
              StatusIs(StatusCode::kInvalidArgument,
                       "'s3://bucket' names no object key: expected s3://BUCKET/KEY"));
  EXPECT_THAT(ParseS3Url("s3://bucket/"),
              StatusIs(StatusCode::kInvalidArgument, "such as s3://bucket/checkpoint.rckpt"));
  EXPECT_THAT(ParseS3Url("s3://bu cket/k"),
              StatusIs(StatusCode::kInvalidArgument, "bucket name 'bu cket' may hold only"));
  EXPECT_THAT(ParseS3Url("s3://b/" + std::string(1025, 'k')),
              StatusIs(StatusCode::kInvalidArgument, "1025 bytes, more than S3's limit of 1024"));
  ASSERT_OK_AND_ASSIGN(S3Url prefix, ParseS3Url("s3://bucket/", UrlKind::kPrefix));
  EXPECT_EQ(prefix.key, "");
}

TEST(IniTest, ParsesSectionsCommentsAndNestedBlocks) {
  ASSERT_OK_AND_ASSIGN(IniFile ini, ParseIni("# comment\n[default]\nregion = eu-west-1\n"
                                             "s3 =\n  addressing_style = path\n"
                                             "  endpoint_url=http://x:1\n"
                                             "Output = json\r\n; other\n[profile dev]\n"
                                             "aws_access_key_id=AKID\n",
                                             "config"));
  EXPECT_EQ(ini["default"]["region"], "eu-west-1");
  EXPECT_EQ(ini["default"]["s3.addressing_style"], "path");
  EXPECT_EQ(ini["default"]["s3.endpoint_url"], "http://x:1");
  EXPECT_EQ(ini["default"]["output"], "json");
  EXPECT_EQ(ini["profile dev"]["aws_access_key_id"], "AKID");
  EXPECT_THAT(ParseIni("[default]\njunk line\n", "cfg"),
              StatusIs(StatusCode::kInvalidArgument, "'cfg', line 2: expected 'name = value'"));
}

TEST(ProfileTest, MergesConfigAndCredentialsFilesCredentialsWinning) {
  const std::string dir = testing::NewTempDir("aws-profile");
  WriteText(dir + "/config",
            "[profile dev]\nregion = ap-south-1\naws_access_key_id = FROMCONFIG\n");
  WriteText(dir + "/credentials",
            "[dev]\naws_access_key_id = FROMCREDS\n"
            "aws_secret_access_key = s\n");
  MapEnvironment env({{"AWS_CONFIG_FILE", dir + "/config"},
                      {"AWS_SHARED_CREDENTIALS_FILE", dir + "/credentials"},
                      {"AWS_PROFILE", "dev"}});
  ASSERT_OK_AND_ASSIGN(Profile p, LoadProfile(S3Options{}, env));
  EXPECT_TRUE(p.found);
  EXPECT_TRUE(p.named_by_user);
  EXPECT_EQ(*p.Find("aws_access_key_id"), "FROMCREDS");
  EXPECT_EQ(*p.Find("region"), "ap-south-1");
  ASSERT_OK_AND_ASSIGN(S3Config c, ResolveConfig(S3Options{}, env, p));
  EXPECT_EQ(c.region, "ap-south-1");
  EXPECT_FALSE(c.endpoint.custom);
  EXPECT_EQ(c.endpoint.Authority(), "s3.ap-south-1.amazonaws.com");
}

TEST(ResolveConfigTest, OptionsThenEnvironmentThenProfileThenDefaults) {
  Profile p;
  p.name = "default";
  p.settings = {{"region", "from-profile"},
                {"endpoint_url", "http://profile:1"},
                {"s3.addressing_style", "virtual"}};
  MapEnvironment env({{"AWS_DEFAULT_REGION", "from-default"},
                      {"AWS_ENDPOINT_URL", "http://generic:2"},
                      {"AWS_ENDPOINT_URL_S3", "http://127.0.0.1:8333/"}});
  ASSERT_OK_AND_ASSIGN(S3Config c, ResolveConfig(S3Options{}, env, p));
  EXPECT_EQ(c.region, "from-default");
  EXPECT_EQ(c.endpoint.scheme, "http");
  EXPECT_EQ(c.endpoint.Authority(), "127.0.0.1:8333");
  EXPECT_EQ(c.addressing, S3Addressing::kVirtualHosted);

  S3Options o;
  o.region = "explicit";
  o.endpoint = "https://[::1]:9000";
  o.addressing = S3Addressing::kPath;
  ASSERT_OK_AND_ASSIGN(c, ResolveConfig(o, env, p));
  EXPECT_EQ(c.region, "explicit");
  EXPECT_EQ(c.endpoint.Authority(), "[::1]:9000");
  EXPECT_TRUE(c.endpoint.IsIpOrLocalhost());
  EXPECT_EQ(c.addressing, S3Addressing::kPath);

  MapEnvironment ignoring(
      {{"AWS_ENDPOINT_URL", "http://x:1"}, {"AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "true"}});
  ASSERT_OK_AND_ASSIGN(c, ResolveConfig(S3Options{}, ignoring, Profile{}));
  EXPECT_FALSE(c.endpoint.custom);
  EXPECT_EQ(c.region, "us-east-1");
}

TEST(ResolveConfigTest, MalformedEndpointsNameWhereTheyCameFrom) {
  MapEnvironment env({{"AWS_ENDPOINT_URL_S3", "ftp://host"}});
  EXPECT_THAT(ResolveConfig(S3Options{}, env, Profile{}),
              StatusIs(StatusCode::kInvalidArgument,
                       "AWS_ENDPOINT_URL_S3 'ftp://host': the scheme must be http or https"));
  S3Options o;
  o.endpoint = "http://host:99999";
  EXPECT_THAT(ResolveConfig(o, MapEnvironment(), Profile{}),
              StatusIs(StatusCode::kInvalidArgument, "the port must be"));
  o.endpoint = "http://host/path";
  EXPECT_THAT(ResolveConfig(o, MapEnvironment(), Profile{}),
              StatusIs(StatusCode::kInvalidArgument, "no path"));
}

TEST(AddressingTest, PathStyleForCustomEndpointsAndBucketsDnsCannotName) {
  S3Config aws;
  aws.endpoint = AwsEndpoint("us-east-1");
  EXPECT_FALSE(UsesPathStyle(aws, "my-bucket"));
  EXPECT_TRUE(UsesPathStyle(aws, "my.dotted.bucket"));
  EXPECT_TRUE(UsesPathStyle(aws, "Upper"));
  S3Config local;
  ASSERT_OK_AND_ASSIGN(local.endpoint, ParseEndpoint("http://localhost:8333", "test"));
  EXPECT_TRUE(UsesPathStyle(local, "my-bucket"));
  local.addressing = S3Addressing::kVirtualHosted;
  EXPECT_FALSE(UsesPathStyle(local, "my-bucket"));
}

TEST(JsonFieldsTest, ReadsTheCredentialDocument) {
  ASSERT_OK_AND_ASSIGN(
      auto f, ParseJsonFields(R"({"Code" : "Success", "LastUpdated": "2024-01-01T00:00:00Z",
        "Type": "AWS-HMAC", "AccessKeyId": "ASIA\u0041", "SecretAccessKey": "s\/k",
        "Token": "t", "Expiration": "2024-01-01T06:00:00Z", "n": 5, "nested": {"a": [1, 2]}})"));
  EXPECT_EQ(f["AccessKeyId"], "ASIAA");
  EXPECT_EQ(f["SecretAccessKey"], "s/k");
  EXPECT_EQ(f["n"], "5");
  EXPECT_EQ(f.count("nested"), 0u);
  EXPECT_THAT(ParseJsonFields("{\"a\": }"), StatusIs(StatusCode::kInvalidArgument, "JSON"));
  ASSERT_OK_AND_ASSIGN(int64_t t, ParseIso8601Utc("2024-01-01T06:00:00Z"));
  EXPECT_EQ(t, 1704088800);
  EXPECT_THAT(ParseIso8601Utc("2024-01-01T06:00:00+02:00"),
              StatusIs(StatusCode::kInvalidArgument, "not a UTC time"));
}

TEST(XmlTest, ParsesErrorsListingsAndCompleteAnswers) {
  ErrorBody e = ParseErrorBody(
      "<?xml version=\"1.0\"?><Error><Code>AuthorizationHeaderMalformed</Code><Message>bad"
      "</Message><Region>eu-west-1</Region></Error>");
  EXPECT_EQ(e.code, "AuthorizationHeaderMalformed");
  EXPECT_EQ(e.region, "eu-west-1");
  EXPECT_EQ(ParseErrorBody("not xml").code, "");

  ASSERT_OK_AND_ASSIGN(CompleteAnswer failed,
                       ParseCompleteAnswer("<Error><Code>InternalError</Code></Error>"));
  EXPECT_TRUE(failed.failed);
  EXPECT_EQ(failed.error.code, "InternalError");
  ASSERT_OK_AND_ASSIGN(
      CompleteAnswer done,
      ParseCompleteAnswer(
          "<CompleteMultipartUploadResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
          "<ETag>\"abc-2\"</ETag></CompleteMultipartUploadResult>"));
  EXPECT_FALSE(done.failed);
  EXPECT_EQ(done.etag, "\"abc-2\"");
  EXPECT_THAT(ParseCompleteAnswer(""), StatusIs(StatusCode::kIoError, "other than"));

  ASSERT_OK_AND_ASSIGN(
      ObjectPage page,
      ParseObjectPage(
          "<ListBucketResult><IsTruncated>true</IsTruncated><Contents><Key>a b</Key><Size>12</Size>"
          "<LastModified>2024-05-01T12:00:00.250Z</LastModified></Contents><CommonPrefixes>"
          "<Prefix>d/</Prefix></CommonPrefixes><NextContinuationToken>tok</NextContinuationToken>"
          "</ListBucketResult>"));
  ASSERT_EQ(page.objects.size(), 1u);
  EXPECT_EQ(page.objects[0].key, "a b");
  EXPECT_EQ(page.objects[0].size, 12u);
  EXPECT_EQ(page.objects[0].modified_unix_ms, 1714564800250);
  EXPECT_EQ(page.prefixes, std::vector<std::string>{"d/"});
  EXPECT_TRUE(page.truncated);
  EXPECT_EQ(page.next_token, "tok");

  EXPECT_EQ(CompleteMultipartUploadBody({"\"a\"", "\"b\""}),
            "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>&quot;a&quot;</ETag>"
            "</Part><Part><PartNumber>2</PartNumber><ETag>&quot;b&quot;</ETag></Part>"
            "</CompleteMultipartUpload>");
  EXPECT_EQ(CompleteMultipartUploadBody({"\"a\""}, {"4waSgw=="}),
            "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>&quot;a&quot;</ETag>"
            "<ChecksumCRC32C>4waSgw==</ChecksumCRC32C></Part></CompleteMultipartUpload>");
}

// One writer's parts: one size for all but the last (R2, Garage), S3's
// limits kept up to the largest object S3 takes.
TEST(PartBytesTest, OneSizeFitsTheExpectedSizeWithinS3Limits) {
  constexpr uint64_t kMiB = 1ull << 20;
  EXPECT_EQ(PartBytes(1ull << 30, 0), 8 * kMiB);
  EXPECT_EQ(PartBytes(100ull << 30, 0), 13 * kMiB);  // 100 GiB in <= 8,000 parts
  EXPECT_EQ(PartBytes(1ull << 40, 0), 132 * kMiB);   // 1 TiB
  EXPECT_EQ(PartBytes(0, 0), kUnknownSizePartBytes);
  EXPECT_EQ(PartBytes(0, 6 * kMiB), 6 * kMiB);
  // Any expected size (5 TiB at most) fits 10,000 parts of its one size,
  // each within limits, with a quarter to spare; an unknown size, 1 TiB.
  for (uint64_t expected : std::vector<uint64_t>{1, 1ull << 30, 1ull << 40, 5ull << 40}) {
    const uint64_t p = PartBytes(expected, 0);
    EXPECT_GE(p, kMinPartBytes);
    EXPECT_LE(p, kMaxPartBytes);
    EXPECT_GE(p * kMaxParts, expected + expected / 4) << expected;
  }
  EXPECT_GE(PartBytes(0, 0) * kMaxParts, 1ull << 40);
}

// A writer's host memory is bounded by the options whatever the part size:
// (parts in flight + 1) parts within upload_buffer_bytes, or two parts.
TEST(PartBytesTest, PartsInFlightKeepMemoryWithinTheOptions) {
  constexpr uint64_t kMiB = 1ull << 20;
  S3Options o;  // 8 in flight, 512 MiB
  EXPECT_EQ(PartsInFlight(o, 8 * kMiB), 8);  // 72 MiB
  for (uint64_t expected : std::vector<uint64_t>{0, 1ull << 30, 1ull << 40, 5ull << 40}) {
    const uint64_t part = PartBytes(expected, 0);
    const int n = PartsInFlight(o, part);
    EXPECT_GE(n, 1);
    EXPECT_LE(n, o.upload_parts_in_flight);
    EXPECT_LE((n + 1) * part, std::max(o.upload_buffer_bytes, 2 * part)) << expected;
  }
  EXPECT_EQ(PartsInFlight(o, PartBytes(0, 0)), 3);  // unknown size: 4 x 128 MiB
  o.upload_buffer_bytes = 0;
  EXPECT_EQ(PartsInFlight(o, 8 * kMiB), 1);
  o.upload_buffer_bytes = 64ull << 30;
  o.upload_parts_in_flight = 2;
  EXPECT_EQ(PartsInFlight(o, 8 * kMiB), 2);
}

}  // namespace
}  // namespace rckpt::s3
