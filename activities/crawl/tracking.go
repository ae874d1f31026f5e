package crawl

import "strings"

// Tracking parameters only tell a site's analytics where a click came
// from: two URLs that differ only in them are the same page, so
// normalisation removes them (Options.KeepTrackingParams keeps them). The
// list is a conservative subset of the global rules of the ClearURLs
// project (github.com/ClearURLs/Rules, provider "globalRules") and of the
// click identifiers documented by the ad platforms that set them: names
// that never select content. Generic names some sites use for content
// ("ref", "source", "spm", "cid") are not in it.
var (
	// trackingPrefixes: campaign parameters of Google Analytics (utm_),
	// Matomo/Piwik (pk_, mtm_) and HubSpot ads (hsa_).
	trackingPrefixes = []string{"utm_", "pk_", "mtm_", "hsa_"}
	// trackingNames: click identifiers and analytics cookies passed in URLs.
	trackingNames = map[string]bool{
		"fbclid": true, "gclid": true, "gclsrc": true, "dclid": true, "gbraid": true, "wbraid": true, // Meta, Google Ads
		"msclkid": true, "yclid": true, "twclid": true, "ttclid": true, "li_fat_id": true, "igshid": true, // Microsoft, Yandex, X, TikTok, LinkedIn, Instagram
		"mc_cid": true, "mc_eid": true, // Mailchimp
		"_ga": true, "_gl": true, // Google Analytics cross-domain linker
		"_hsenc": true, "_hsmi": true, "__hssc": true, "__hstc": true, "__hsfp": true, "hsctatracking": true, // HubSpot
		"mkt_tok":     true,                     // Marketo
		"oly_anon_id": true, "oly_enc_id": true, // Omeda
		"vero_id": true, "vero_conv": true, // Vero
		"_openstat":     true,                          // Openstat
		"fb_action_ids": true, "fb_action_types": true, // Facebook shares
		"fb_ref": true, "fb_source": true,
		"wickedid": true, "rb_clickid": true, "s_cid": true, "ef_id": true, // Wicked Reports, Rakuten, Adobe
	}
)

// IsTrackingParam reports whether the query parameter name (decoded;
// matched case-insensitively) is a tracking parameter that normalisation
// removes.
func IsTrackingParam(name string) bool {
	n := strings.ToLower(name)
	if trackingNames[n] {
		return true
	}
	for _, p := range trackingPrefixes {
		if strings.HasPrefix(n, p) && len(n) > len(p) {
			return true
		}
	}
	return false
}
