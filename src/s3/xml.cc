#include "s3/xml.h"

#include <charconv>
#include <pugixml.hpp>

#include "s3/json_fields.h"

namespace rckpt::s3 {
namespace {

bool Load(pugi::xml_document& doc, std::string_view xml) {
  return doc.load_buffer(xml.data(), xml.size()).status == pugi::status_ok;
}

uint64_t ToU64(const char* text) {
  uint64_t v = 0;
  const std::string_view s(text);
  std::from_chars(s.data(), s.data() + s.size(), v);
  return v;
}

Status NotA(const char* what, std::string_view xml) {
  return Status::IoError(
      std::string("the server answered something other than ") + what + " (" +
      std::to_string(xml.size()) + " bytes" +
      (xml.empty() ? "" : ", starting '" + std::string(xml.substr(0, 60)) + "'") + ")");
}

}  // namespace

ErrorBody ParseErrorBody(std::string_view xml) {
  ErrorBody e;
  pugi::xml_document doc;
  if (!Load(doc, xml)) return e;
  const pugi::xml_node err = doc.child("Error");
  e.code = err.child_value("Code");
  e.message = err.child_value("Message");
  e.region = err.child_value("Region");
  e.request_id = err.child_value("RequestId");
  return e;
}

Result<std::string> ParseUploadId(std::string_view xml) {
  pugi::xml_document doc;
  if (Load(doc, xml)) {
    std::string id = doc.child("InitiateMultipartUploadResult").child_value("UploadId");
    if (!id.empty()) return id;
  }
  return NotA("an upload id", xml);
}

std::string CompleteMultipartUploadBody(const std::vector<std::string>& etags,
                                        const std::vector<std::string>& crc32cs) {
  std::string out = "<CompleteMultipartUpload>";
  for (size_t i = 0; i < etags.size(); ++i) {
    out += "<Part><PartNumber>" + std::to_string(i + 1) + "</PartNumber><ETag>" +
           XmlEscape(etags[i]) + "</ETag>";
    if (i < crc32cs.size() && !crc32cs[i].empty()) {
      out += "<ChecksumCRC32C>" + XmlEscape(crc32cs[i]) + "</ChecksumCRC32C>";
    }
    out += "</Part>";
  }
  out += "</CompleteMultipartUpload>";
  return out;
}

Result<CompleteAnswer> ParseCompleteAnswer(std::string_view xml) {
  pugi::xml_document doc;
  CompleteAnswer a;
  if (Load(doc, xml)) {
    if (doc.child("Error")) {
      a.failed = true;
      a.error = ParseErrorBody(xml);
      return a;
    }
    const pugi::xml_node result = doc.child("CompleteMultipartUploadResult");
    if (result) {
      a.etag = result.child_value("ETag");
      return a;
    }
  }
  return NotA("the result of CompleteMultipartUpload", xml);
}

Result<ObjectPage> ParseObjectPage(std::string_view xml) {
  pugi::xml_document doc;
  const pugi::xml_node root = Load(doc, xml) ? doc.child("ListBucketResult") : pugi::xml_node();
  if (!root) return NotA("an object listing", xml);
  ObjectPage page;
  for (pugi::xml_node c : root.children("Contents")) {
    page.objects.push_back(ListedObject{c.child_value("Key"), ToU64(c.child_value("Size")),
                                        ParseS3Time(c.child_value("LastModified"))});
  }
  for (pugi::xml_node p : root.children("CommonPrefixes")) {
    page.prefixes.emplace_back(p.child_value("Prefix"));
  }
  page.truncated = std::string_view(root.child_value("IsTruncated")) == "true";
  page.next_token = root.child_value("NextContinuationToken");
  return page;
}

Result<UploadPage> ParseUploadPage(std::string_view xml) {
  pugi::xml_document doc;
  const pugi::xml_node root =
      Load(doc, xml) ? doc.child("ListMultipartUploadsResult") : pugi::xml_node();
  if (!root) return NotA("a listing of multipart uploads", xml);
  UploadPage page;
  for (pugi::xml_node u : root.children("Upload")) {
    page.uploads.push_back(ListedUpload{u.child_value("Key"), u.child_value("UploadId"),
                                        ParseS3Time(u.child_value("Initiated"))});
  }
  page.truncated = std::string_view(root.child_value("IsTruncated")) == "true";
  page.next_key_marker = root.child_value("NextKeyMarker");
  page.next_upload_id_marker = root.child_value("NextUploadIdMarker");
  return page;
}

int64_t ParseS3Time(std::string_view text) {
  Result<int64_t> seconds = ParseIso8601Utc(text);
  if (!seconds.ok()) return 0;
  int64_t ms = 0;
  const size_t dot = text.find('.');
  if (dot != std::string_view::npos) {
    int digits = 0;
    for (size_t i = dot + 1; i < text.size() && digits < 3 && text[i] >= '0' && text[i] <= '9';
         ++i, ++digits) {
      ms = ms * 10 + (text[i] - '0');
    }
    for (; digits < 3; ++digits) ms *= 10;
  }
  return *seconds * 1000 + ms;
}

std::string XmlEscape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (const char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

}  // namespace rckpt::s3
