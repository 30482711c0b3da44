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
using ::testing::Not;

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

// One rule, as the AWS CLI's: the scheme is "s3://", in lower case.
TEST(S3UrlTest, TheSchemeInAnotherCaseIsRefusedNamingTheRule) {
  for (const char* url : {"S3://b/k", "s3:/b/k-not-a-url", "x"}) {
    EXPECT_THAT(ParseS3Url(url), StatusIs(StatusCode::kInvalidArgument, "s3://"));
  }
  EXPECT_THAT(ParseS3Url("S3://bucket/key"),
              StatusIs(StatusCode::kInvalidArgument,
                       "'S3://bucket/key': an object-storage URL begins with s3:// in lower case "
                       "(as the AWS CLI takes it), not 'S3://'"));
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

// The hosts the AWS SDKs' S3 endpoint rules give each partition and variant
// (the rules' test cases and AWS's endpoint pages name these).
TEST(AwsEndpointTest, EachPartitionHasItsOwnDomainAndVariants) {
  auto host = [](const std::string& region, EndpointVariant v = {}) -> std::string {
    Result<Endpoint> e = AwsEndpoint(region, v);
    if (!e.ok()) return "error: " + e.status().message();
    EXPECT_EQ(e->scheme, "https");
    EXPECT_FALSE(e->custom);
    return e->host;
  };
  const EndpointVariant fips{.fips = true}, dual{.dualstack = true};
  const EndpointVariant both{.fips = true, .dualstack = true};
  EXPECT_EQ(host("us-east-1"), "s3.us-east-1.amazonaws.com");
  EXPECT_EQ(host("eu-west-1", dual), "s3.dualstack.eu-west-1.amazonaws.com");
  EXPECT_EQ(host("us-east-1", fips), "s3-fips.us-east-1.amazonaws.com");
  EXPECT_EQ(host("us-east-2", both), "s3-fips.dualstack.us-east-2.amazonaws.com");
  EXPECT_EQ(host("cn-north-1"), "s3.cn-north-1.amazonaws.com.cn");
  EXPECT_EQ(host("cn-northwest-1", dual), "s3.dualstack.cn-northwest-1.amazonaws.com.cn");
  EXPECT_EQ(host("cn-north-1", dual), "s3.dualstack.cn-north-1.amazonaws.com.cn");
  EXPECT_THAT(host("cn-north-1", fips), HasSubstr("partition aws-cn has none"));
  EXPECT_EQ(host("us-gov-west-1"), "s3.us-gov-west-1.amazonaws.com");
  EXPECT_EQ(host("us-gov-west-1", fips), "s3-fips.us-gov-west-1.amazonaws.com");
  EXPECT_EQ(host("us-gov-east-1", dual), "s3.dualstack.us-gov-east-1.amazonaws.com");
  EXPECT_EQ(host("us-gov-west-1", both), "s3-fips.dualstack.us-gov-west-1.amazonaws.com");
  EXPECT_EQ(host("us-iso-east-1"), "s3.us-iso-east-1.c2s.ic.gov");
  EXPECT_EQ(host("us-isob-east-1"), "s3.us-isob-east-1.sc2s.sgov.gov");
  EXPECT_EQ(host("eu-isoe-west-1"), "s3.eu-isoe-west-1.cloud.adc-e.uk");
  EXPECT_EQ(host("us-isof-south-1"), "s3.us-isof-south-1.csp.hci.ic.gov");
  EXPECT_EQ(host("eusc-de-east-1"), "s3.eusc-de-east-1.amazonaws.eu");
  // A region no partition claims is aws's, as in the SDKs.
  EXPECT_EQ(host("xx-mars-1"), "s3.xx-mars-1.amazonaws.com");
  EXPECT_STREQ(PartitionOf("us-gov-west-1").name, "aws-us-gov");
  EXPECT_STREQ(PartitionOf("cn-north-1").name, "aws-cn");
  EXPECT_STREQ(PartitionOf("us-east-1").name, "aws");
  // The region becomes part of a host name: nothing else gets in.
  EXPECT_THAT(host("us-east-1.evil.example/x"), HasSubstr("a region is letters, digits and '-'"));
  EXPECT_THAT(host(""), HasSubstr("a region is letters"));
}

TEST(ResolveConfigTest, FipsAndDualStackFromTheEnvironmentThenTheProfile) {
  Profile p;
  p.name = "gov";
  p.settings = {{"region", "us-gov-west-1"}, {"use_dualstack_endpoint", "true"}};
  ASSERT_OK_AND_ASSIGN(S3Config c, ResolveConfig(S3Options{}, MapEnvironment(), p));
  EXPECT_EQ(c.endpoint.host, "s3.dualstack.us-gov-west-1.amazonaws.com");
  MapEnvironment fips({{"AWS_USE_FIPS_ENDPOINT", "TRUE"}});
  ASSERT_OK_AND_ASSIGN(c, ResolveConfig(S3Options{}, fips, p));
  EXPECT_EQ(c.endpoint.host, "s3-fips.dualstack.us-gov-west-1.amazonaws.com");
  EXPECT_TRUE(c.variant.fips && c.variant.dualstack);
  // The environment wins over the profile, "false" included.
  MapEnvironment off({{"AWS_USE_FIPS_ENDPOINT", "true"}, {"AWS_USE_DUALSTACK_ENDPOINT", "false"}});
  ASSERT_OK_AND_ASSIGN(c, ResolveConfig(S3Options{}, off, p));
  EXPECT_EQ(c.endpoint.host, "s3-fips.us-gov-west-1.amazonaws.com");
  p.settings["use_fips_endpoint"] = "true";
  ASSERT_OK_AND_ASSIGN(c, ResolveConfig(S3Options{}, MapEnvironment(), p));
  EXPECT_EQ(c.endpoint.host, "s3-fips.dualstack.us-gov-west-1.amazonaws.com");
  // The profile's "s3 =" block: its use_dualstack_endpoint = true wins, as in botocore.
  Profile block;
  block.settings = {{"region", "eu-west-1"}, {"s3.use_dualstack_endpoint", "true"}};
  ASSERT_OK_AND_ASSIGN(c, ResolveConfig(S3Options{}, off, block));
  EXPECT_EQ(c.endpoint.host, "s3-fips.dualstack.eu-west-1.amazonaws.com");

  MapEnvironment china({{"AWS_REGION", "cn-north-1"}});
  ASSERT_OK_AND_ASSIGN(c, ResolveConfig(S3Options{}, china, Profile{}));
  EXPECT_EQ(c.endpoint.host, "s3.cn-north-1.amazonaws.com.cn");
  MapEnvironment china_fips({{"AWS_REGION", "cn-north-1"}, {"AWS_USE_FIPS_ENDPOINT", "true"}});
  EXPECT_THAT(ResolveConfig(S3Options{}, china_fips, Profile{}),
              StatusIs(StatusCode::kInvalidArgument, "partition aws-cn has none"));
  MapEnvironment typo({{"AWS_USE_DUALSTACK_ENDPOINT", "yes"}});
  EXPECT_THAT(ResolveConfig(S3Options{}, typo, Profile{}),
              StatusIs(StatusCode::kInvalidArgument,
                       "AWS_USE_DUALSTACK_ENDPOINT is 'yes': expected true or false"));
  // The SDKs' rules refuse a custom endpoint with either.
  S3Options custom;
  custom.endpoint = "http://127.0.0.1:8333";
  EXPECT_THAT(ResolveConfig(custom, fips, Profile{}),
              StatusIs(StatusCode::kInvalidArgument,
                       "FIPS endpoints were asked for (AWS_USE_FIPS_ENDPOINT or "
                       "use_fips_endpoint), but the endpoint is given (http://127.0.0.1:8333)"));
  MapEnvironment dual_custom({{"AWS_USE_DUALSTACK_ENDPOINT", "true"},
                              {"AWS_ENDPOINT_URL", "http://127.0.0.1:8333"}});
  EXPECT_THAT(ResolveConfig(S3Options{}, dual_custom, Profile{}),
              StatusIs(StatusCode::kInvalidArgument, "dual-stack endpoints were asked for"));
}

TEST(ResolveConfigTest, AnEndpointsUserAndPasswordAreNeverShown) {
  S3Options o;
  o.endpoint = "https://AKIDUSER:SeCrEtPaSs@s3.example.com:9000/";
  Result<S3Config> c = ResolveConfig(o, MapEnvironment(), Profile{});
  EXPECT_THAT(c, StatusIs(StatusCode::kInvalidArgument, "'https://***@s3.example.com:9000/'"));
  EXPECT_THAT(c.status().message(), Not(HasSubstr("SeCrEtPaSs")));
  EXPECT_THAT(c.status().message(), Not(HasSubstr("AKIDUSER")));
  MapEnvironment env({{"AWS_ENDPOINT_URL_S3", "http://u:p@ss@host:1"}});
  c = ResolveConfig(S3Options{}, env, Profile{});
  EXPECT_THAT(c, StatusIs(StatusCode::kInvalidArgument, "AWS_ENDPOINT_URL_S3 'http://***@host:1'"));
  EXPECT_THAT(c.status().message(), Not(HasSubstr("ss@")));
  EXPECT_EQ(RedactedUrl("http://host:1/a@b"), "http://host:1/a@b");  // a path's '@' is no user
  EXPECT_EQ(RedactedUrl("http://host:1"), "http://host:1");
  EXPECT_EQ(RedactedUrl("user:pw@host"), "***@host");
}

TEST(AddressingTest, PathStyleForCustomEndpointsAndBucketsDnsCannotName) {
  S3Config aws;
  ASSERT_OK_AND_ASSIGN(aws.endpoint, AwsEndpoint("us-east-1"));
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
}

TEST(PartBytesTest, FitsTheExpectedSizeWithinS3Limits) {
  constexpr uint64_t kMiB = 1ull << 20;
  EXPECT_EQ(PartBytes(1, 0, 0), 8 * kMiB);
  EXPECT_EQ(PartBytes(1, 1ull << 30, 0), 8 * kMiB);
  EXPECT_EQ(PartBytes(1, 100ull << 30, 0), 13 * kMiB);  // 100 GiB in <= 8,000 parts
  EXPECT_EQ(PartBytes(7, 0, 6 * kMiB), 6 * kMiB);
  // Any expected size (5 TiB at most) fits 10,000 parts, each within limits,
  // even when the object turns out larger than expected.
  for (uint64_t expected : std::vector<uint64_t>{0, 1ull << 30, 1ull << 40, 5ull << 40}) {
    uint64_t total = 0;
    for (uint64_t n = 1; n <= kMaxParts; ++n) {
      const uint64_t p = PartBytes(n, expected, 0);
      ASSERT_GE(p, kMinPartBytes);
      ASSERT_LE(p, kMaxPartBytes);
      total += p;
    }
    EXPECT_GE(total, expected + (expected / 4)) << expected;
  }
}

}  // namespace
}  // namespace rckpt::s3
